// The auth server half (Keycloak conventions, docs/protocol.md 'Authentication and tenant'):
// client-credentials token endpoint and JWKS per realm. Anything else on HTTP, and any realm the
// key store does not serve, is 404.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { KeyStore, TENANT_NAME } from './keys.js';
import { MAX_LOG_ENTRIES, pushRecent } from './session-window.js';
import { ALLOWED_SCOPES, issueToken } from './tokens.js';
import type { TokenRequestRecord } from './types.js';

export interface AuthContext {
  keys: KeyStore;
  authBase: () => string;
  now: () => number;
  clients: Record<string, Array<{ clientId: string; clientSecret: string }>>;
  /** the most recent token requests */
  tokenRequests: TokenRequestRecord[];
  /** certs (JWKS) requests received, for any realm */
  jwksRequests: number;
  /** lifetime of tokens from the token endpoint (the upstream's: 300 s; tests shorten it to watch refreshes) */
  tokenLifetimeSeconds: number;
}

const ROUTE = /^\/realms\/([^/]+)\/protocol\/openid-connect\/(token|certs)$/;
const MAX_BODY = 64 * 1024;

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) reject(new Error('body too large'));
      else parts.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

export async function handleAuthRequest(ctx: AuthContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://emulator');
  const m = ROUTE.exec(url.pathname);
  if (!m) return json(res, 404, { error: 'not_found' });
  const [, tenant, what] = m;
  if (what === 'certs') ctx.jwksRequests++;
  if (!TENANT_NAME.test(tenant) || !ctx.keys.serves(tenant)) return json(res, 404, { error: 'Realm does not exist' });
  if (what === 'certs') {
    if (req.method !== 'GET') return json(res, 405, { error: 'method_not_allowed' });
    return json(res, 200, await ctx.keys.jwks(tenant));
  }
  if (req.method !== 'POST') return json(res, 405, { error: 'method_not_allowed' });
  if (!(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
    return json(res, 400, { error: 'invalid_request', error_description: 'form-encoded body required' });
  }
  const form = new URLSearchParams(await readBody(req));
  if (form.get('grant_type') !== 'client_credentials') {
    return json(res, 400, { error: 'unsupported_grant_type' });
  }
  const clientId = form.get('client_id') ?? '';
  const scope = (form.get('scope') ?? 'openid').trim() || 'openid';
  pushRecent(ctx.tokenRequests, { tenant, clientId, scope, at: ctx.now() }, MAX_LOG_ENTRIES);
  const client = (ctx.clients[tenant] ?? []).find((c) => c.clientId === clientId);
  if (!client || client.clientSecret !== form.get('client_secret')) {
    return json(res, 401, {
      error: 'invalid_client',
      error_description: 'Invalid client or Invalid client credentials',
    });
  }
  const scopes = scope.split(/\s+/);
  if (!scopes.includes('openid') || scopes.some((s) => !ALLOWED_SCOPES.has(s))) {
    return json(res, 400, { error: 'invalid_scope', error_description: 'Invalid scopes: ' + scope });
  }
  const access_token = await issueToken(ctx.keys, ctx.authBase(), ctx.now(), {
    tenant,
    scope,
    clientId,
    expiresInSeconds: ctx.tokenLifetimeSeconds,
  });
  return json(res, 200, {
    access_token,
    expires_in: ctx.tokenLifetimeSeconds,
    token_type: 'Bearer',
    scope,
    'not-before-policy': 0,
  });
}
