// One JWKS per tenant realm, fetched on first use, refetched on an unknown `kid` (at most once per
// cooldown, one request in flight however many upgrades wait) and when older than maxAge.
// Hand-written around jose's createLocalJWKSet instead of createRemoteJWKSet because jose 5's
// remote set can't take an injected fetch or clock, and we also need negative caching of
// realms that don't exist and a bound on how many realms are held.
import { createLocalJWKSet, errors, type JWK, type JWSHeaderParameters, type FlattenedJWSInput, type KeyLike } from 'jose';
import { realmUrl } from './tenant.js';

type KeyFn = (h: JWSHeaderParameters, t: FlattenedJWSInput) => Promise<KeyLike>;

/** The realm's certs endpoint answered 404: the tenant does not exist on the auth server. */
export class UnknownRealmError extends Error {}
/** The keys could not be fetched (network, 5xx, bad JSON): not the client's fault. */
export class JwksUnavailableError extends Error {}

interface Entry {
  keys?: KeyFn;
  fetchedAt: number; // last successful fetch
  attemptedAt: number; // last attempt, successful or not
  failure?: Error; // last attempt's failure, replayed during the cooldown
  pending?: Promise<void>;
}

export interface JwksCacheOptions {
  authUrl: string;
  cooldownMs: number;
  maxAgeMs: number;
  fetch: typeof fetch;
  now: () => number;
  /** Most realms held at once; the least recently added is dropped. */
  maxRealms?: number;
  timeoutMs?: number;
}

export class JwksCache {
  private readonly entries = new Map<string, Entry>();
  constructor(private readonly o: JwksCacheOptions) {}

  /** A jose key function for this tenant's realm. */
  keyFor(tenant: string): KeyFn {
    return (header, token) => this.getKey(tenant, header, token);
  }

  clear(): void {
    this.entries.clear();
  }

  private async getKey(tenant: string, header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<KeyLike> {
    const e = this.entry(tenant);
    if (!e.keys || this.o.now() - e.fetchedAt >= this.o.maxAgeMs) await this.refresh(tenant, e, !e.keys);
    const tried = e.keys;
    if (!tried) throw e.failure ?? new JwksUnavailableError('no keys');
    try {
      return await tried(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      // Keys rotated by someone else's refetch while we waited: use those.
      if (e.keys !== tried) return e.keys!(header, token);
      await this.refresh(tenant, e, false);
      if (e.keys === tried) throw err;
      return e.keys!(header, token);
    }
  }

  /** Single-flight: joins a fetch in flight; else fetches unless within the cooldown. */
  private refresh(tenant: string, e: Entry, required: boolean): Promise<void> {
    if (e.pending) return e.pending;
    const wait = e.failure ? Math.min(this.o.cooldownMs, 5000) : this.o.cooldownMs;
    if (e.attemptedAt > 0 && this.o.now() - e.attemptedAt < wait) {
      return required && e.failure ? Promise.reject(e.failure) : Promise.resolve();
    }
    e.attemptedAt = this.o.now();
    e.pending = this.fetchKeys(tenant)
      .then((keys) => {
        e.keys = keys;
        e.fetchedAt = this.o.now();
        e.failure = undefined;
      })
      .catch((err: Error) => {
        e.failure = err;
        // An unknown realm forgets any old keys; an outage keeps serving them.
        if (err instanceof UnknownRealmError) e.keys = undefined;
        if (!e.keys) throw err;
      })
      .finally(() => {
        e.pending = undefined;
      });
    return e.pending;
  }

  private async fetchKeys(tenant: string): Promise<KeyFn> {
    const url = `${realmUrl(this.o.authUrl, tenant)}/protocol/openid-connect/certs`;
    let res: Response;
    try {
      res = await this.o.fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(this.o.timeoutMs ?? 5000) });
    } catch (err) {
      throw new JwksUnavailableError(`JWKS request failed: ${(err as Error).name}`);
    }
    if (res.status === 404) {
      await res.body?.cancel();
      throw new UnknownRealmError(`realm has no JWKS (HTTP 404)`);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new JwksUnavailableError(`JWKS request failed: HTTP ${res.status}`);
    }
    try {
      const body = (await res.json()) as { keys: JWK[] };
      return createLocalJWKSet(body) as KeyFn;
    } catch {
      throw new JwksUnavailableError('JWKS response is not a JSON Web Key Set');
    }
  }

  private entry(tenant: string): Entry {
    let e = this.entries.get(tenant);
    if (!e) {
      const max = this.o.maxRealms ?? 1000;
      if (this.entries.size >= max) this.entries.delete(this.entries.keys().next().value as string);
      e = { fetchedAt: 0, attemptedAt: 0 };
      this.entries.set(tenant, e);
    }
    return e;
  }
}
