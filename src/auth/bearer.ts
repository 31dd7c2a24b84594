// `Authorization: Bearer <token>`: the scheme is case-insensitive and the
// token is one run of non-space characters. The one parser for the gateway's client tokens and
// the usage API's token.

/** `Bearer <token>` → the token; anything else (no scheme, no token, inner spaces) → undefined. */
export function parseBearer(value: string | undefined): string | undefined {
  return /^bearer\s+(\S+)$/i.exec(value?.trim() ?? '')?.[1];
}
