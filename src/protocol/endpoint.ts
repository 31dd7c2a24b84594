// The gateway's two sockets, one per upstream API: dictation (/transcribe) and ambient (/streams).
// The same names are the limited tokens' scopes and the usage ledger's endpoint column.
export const ENDPOINTS = ['transcribe', 'streams'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];

export const isEndpoint = (s: string): s is Endpoint => (ENDPOINTS as readonly string[]).includes(s);
