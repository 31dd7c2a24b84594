// Where a client's credentials come from, first found wins: the `token` query parameter, then an
// Authorization header, then Sec-WebSocket-Protocol pairs (the SDK's proxy
// mode: [name, encodeURIComponent(value), ...], because browsers can't set headers).
import { parseBearer } from './bearer.js';
import type { UpgradeRequest } from './types.js';

export interface Presented {
  /** The bearer value as presented (normally `Bearer <jwt>`); undefined when none was found. */
  credential?: string;
  tenant?: string;
  via: 'query' | 'header' | 'protocol';
  /** The subprotocol to answer with, when the client offered any. */
  protocol?: string;
}

export function presentedCredentials(req: UpgradeRequest): Presented {
  const offered = splitProtocols(req.headers['sec-websocket-protocol']);
  const pairs = protocolPairs(offered);
  const protocol = chooseProtocol(offered, pairs);
  const tenant = nonEmpty(req.query.get('tenant-name')) ?? nonEmpty(req.headers['tenant-name']) ?? pairs.tenant;

  const q = nonEmpty(req.query.get('token'));
  if (q !== undefined)
    return { credential: q, tenant: nonEmpty(req.query.get('tenant-name')) ?? tenant, via: 'query', protocol };
  const h = nonEmpty(req.headers['authorization']);
  if (h !== undefined)
    return { credential: h, tenant: nonEmpty(req.headers['tenant-name']) ?? tenant, via: 'header', protocol };
  if (pairs.authorization !== undefined)
    return { credential: pairs.authorization, tenant: pairs.tenant ?? tenant, via: 'protocol', protocol };
  return { tenant, via: 'query', protocol };
}

/** `Bearer <jwt>` (scheme case-insensitive) or a bare JWT → the JWT; anything else → undefined. */
export function bearerToken(credential: string): string | undefined {
  const trimmed = credential.trim();
  return (
    parseBearer(trimmed) ?? (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/.test(trimmed) ? trimmed : undefined)
  );
}

function splitProtocols(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

interface Pairs {
  authorization?: string;
  tenant?: string;
  /** The Authorization name as offered (its exact spelling is what we answer with). */
  authorizationName?: string;
}

function protocolPairs(offered: string[]): Pairs {
  const out: Pairs = {};
  for (let i = 0; i + 1 < offered.length; i += 2) {
    const name = offered[i].toLowerCase();
    if (name !== 'authorization' && name !== 'tenant-name') continue;
    const value = safeDecode(offered[i + 1]);
    if (value === undefined) continue;
    if (name === 'authorization' && out.authorization === undefined) {
      out.authorization = value;
      out.authorizationName = offered[i];
    } else if (name === 'tenant-name' && out.tenant === undefined) {
      out.tenant = value;
    }
  }
  return out;
}

/**
 * A browser fails the handshake unless the server answers with one of the offered protocols.
 * Answer with a pair's *name* (never a value: those are secrets), else the first offered.
 */
function chooseProtocol(offered: string[], pairs: Pairs): string | undefined {
  if (offered.length === 0) return undefined;
  if (pairs.authorizationName) return pairs.authorizationName;
  const tenantName = offered.find((p, i) => i % 2 === 0 && p.toLowerCase() === 'tenant-name');
  return tenantName ?? offered[0];
}

function safeDecode(v: string): string | undefined {
  try {
    return decodeURIComponent(v);
  } catch {
    return undefined;
  }
}

function nonEmpty(v: string | null | undefined): string | undefined {
  return v === null || v === undefined || v.trim() === '' ? undefined : v.trim();
}
