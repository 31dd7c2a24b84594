// The token the gateway presents upstream for a tenant: the client's own (passthrough) or the
// gateway's client-credentials token per tenant, cached until shortly before it expires, with one
// token request in flight per tenant however many sessions ask at once.
import { isValidTenant, realmUrl } from './tenant.js';

export type ClientCredentials = Record<string, { clientId: string; clientSecret: string }>;

export interface UpstreamCredentials {
  /** passthrough: the client's token; client-credentials: the gateway's cached token for the tenant. */
  tokenFor(tenant: string, clientToken: string): Promise<string>;
  close(): void;
}

export interface UpstreamCredentialsOptions {
  mode: 'passthrough' | 'client-credentials';
  authUrl: string;
  /** tenant → client credentials, or "*" for any tenant. */
  credentials?: ClientCredentials;
  /** Default 60: refresh when less than this remains. */
  refreshBeforeSeconds?: number;
  fetch?: typeof fetch;
  now?: () => number;
  timeoutMs?: number;
}

interface Cached {
  token: string;
  expiresAt: number;
  refreshAt: number;
}

export function createUpstreamCredentials(o: UpstreamCredentialsOptions): UpstreamCredentials {
  if (o.mode === 'passthrough') return { tokenFor: async (_tenant, clientToken) => clientToken, close: () => {} };

  const creds = o.credentials ?? {};
  if (Object.keys(creds).length === 0) {
    throw new Error('UPSTREAM_AUTH=client-credentials needs UPSTREAM_CREDENTIALS_FILE or UPSTREAM_CREDENTIALS');
  }
  const now = o.now ?? Date.now;
  const doFetch = o.fetch ?? fetch;
  const refreshBeforeMs = (o.refreshBeforeSeconds ?? 60) * 1000;
  const cache = new Map<string, Cached>();
  const inFlight = new Map<string, Promise<string>>();

  async function request(tenant: string): Promise<string> {
    const c = creds[tenant] ?? creds['*'];
    if (!c) throw new Error(`no upstream client credentials for tenant "${tenant}"`);
    const url = `${realmUrl(o.authUrl, tenant)}/protocol/openid-connect/token`;
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
      scope: 'openid',
    });
    let res: Response;
    try {
      res = await doFetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form.toString(),
        signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
      });
    } catch (err) {
      throw new Error(`upstream token request for tenant "${tenant}" failed: ${(err as Error).name}`, { cause: err });
    }
    const body = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    if (!res.ok) {
      // The OAuth error code (e.g. unauthorized_client) helps operators and carries no secret.
      const code = typeof body?.error === 'string' && /^[a-z_]{1,64}$/.test(body.error) ? ` (${body.error})` : '';
      throw new Error(`upstream token request for tenant "${tenant}" failed: HTTP ${res.status}${code}`);
    }
    const token = body?.access_token;
    if (typeof token !== 'string' || token === '') {
      throw new Error(`upstream token response for tenant "${tenant}" has no access_token`);
    }
    const lifeMs = (typeof body?.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 300) * 1000;
    const t = now();
    // Short-lived tokens: refresh at half-life rather than before they were even issued.
    const margin = Math.min(refreshBeforeMs, lifeMs / 2);
    cache.set(tenant, { token, expiresAt: t + lifeMs, refreshAt: t + lifeMs - margin });
    return token;
  }

  async function tokenFor(tenant: string): Promise<string> {
    if (!isValidTenant(tenant)) throw new Error('invalid tenant name');
    const cached = cache.get(tenant);
    const t = now();
    if (cached && t < cached.refreshAt) return cached.token;
    let p = inFlight.get(tenant);
    if (!p) {
      p = request(tenant).finally(() => inFlight.delete(tenant));
      inFlight.set(tenant, p);
    }
    try {
      return await p;
    } catch (err) {
      // A failed early refresh still leaves a usable token until it really expires.
      if (cached && now() < cached.expiresAt) return cached.token;
      throw err;
    }
  }

  return {
    tokenFor: (tenant) => tokenFor(tenant),
    close: () => {
      cache.clear();
      inFlight.clear();
    },
  };
}
