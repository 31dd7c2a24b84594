// Routing and authentication of socket upgrades, as the real service does them: path, tenant,
// bearer token from the query (`token=Bearer <jwt>`) or from Authorization + Tenant-Name headers.
import type { IncomingMessage } from 'node:http';
import type { Endpoint } from '../protocol/index.js';
import { KeyStore, TENANT_NAME } from './keys.js';
import { verifyToken } from './tokens.js';

export type UpgradeVerdict =
  | { ok: true; endpoint: Endpoint; interactionId?: string; tenant: string; token: string }
  | { ok: false; status: number; reason: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STREAMS = /^\/audio-bridge\/v2\/interactions\/([^/]+)\/streams$/;

// The upstream's bearer rule, kept apart from the gateway's parser (src/auth/bearer.ts) on purpose:
// the emulator checks what the gateway sends, so it must not agree with the gateway by construction.
function bearer(value: string | null | undefined): string | null {
  const m = /^Bearer\s+(\S+)$/i.exec((value ?? '').trim());
  return m ? m[1] : null;
}

export async function checkUpgrade(
  req: IncomingMessage,
  keys: KeyStore,
  authBase: string,
  nowMs: number,
): Promise<UpgradeVerdict> {
  const url = new URL(req.url ?? '/', 'http://emulator');
  let endpoint: Endpoint;
  let interactionId: string | undefined;
  const streams = STREAMS.exec(url.pathname);
  if (url.pathname === '/audio-bridge/v2/transcribe') endpoint = 'transcribe';
  else if (streams && UUID.test(streams[1])) {
    endpoint = 'streams';
    interactionId = streams[1];
  } else return { ok: false, status: 404, reason: 'no such socket' };

  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const tenant = url.searchParams.get('tenant-name') ?? header('tenant-name');
  const token = bearer(url.searchParams.get('token')) ?? bearer(header('authorization'));
  if (!tenant || !TENANT_NAME.test(tenant)) return { ok: false, status: 401, reason: 'missing or unknown tenant-name' };
  if (!token) return { ok: false, status: 401, reason: 'missing bearer token' };
  const verdict = await verifyToken(keys, authBase, tenant, token, endpoint, nowMs);
  if (!verdict.ok) return verdict;
  return { ok: true, endpoint, interactionId, tenant, token };
}
