// One JWKS per tenant realm. The tenant name comes from an unauthenticated client, so every auth
// server request a client can cause is bounded, across tenants:
// - known realms (their JWKS was fetched before) are refetched on an unknown `kid` at most once per
//   cooldown and when older than maxAge, one request in flight however many upgrades wait;
// - a realm not known yet costs a token from one budget shared by all tenants (a few a second);
//   when it is spent the upgrade is refused ("retry") without a request;
// - realms that answered 404 are refused without a request for a while (negative cache);
// - known and unknown realms sit in two capped LRU maps: sprayed names never evict known realms.
// Hand-written around jose's createLocalJWKSet instead of createRemoteJWKSet because jose 5's
// remote set can't take an injected fetch or clock, nor do any of the above.
import type { JWK, JWSHeaderParameters, FlattenedJWSInput, KeyLike } from 'jose';
import * as errors from 'jose/errors';
import { createLocalJWKSet } from 'jose/jwks/local';
import { realmUrl } from './tenant.js';

type KeyFn = (h: JWSHeaderParameters, t: FlattenedJWSInput) => Promise<KeyLike>;

/** JWKS requests for realms not known yet, all tenants together: a second, and the burst. */
const NEW_REALMS_PER_SECOND = 5;
const NEW_REALM_BURST = 10;
/** A realm that answered 404 is refused without a request this long; at most this many are held. */
const UNKNOWN_REALM_TTL_MS = 300_000;
const MAX_UNKNOWN_REALMS = 10_000;

/** The realm's certs endpoint answered 404: the tenant does not exist on the auth server. */
export class UnknownRealmError extends Error {}
/** The keys could not be fetched (network, 5xx, bad JSON): not the client's fault. */
export class JwksUnavailableError extends Error {}
/** The budget for realms not known yet is spent: refused without asking the auth server. */
export class JwksBudgetError extends Error {}

interface Entry {
  keys: KeyFn;
  fetchedAt: number; // last successful fetch
  attemptedAt: number; // last attempt, successful or not
  pending?: Promise<void>;
}

export interface JwksCacheOptions {
  authUrl: string;
  cooldownMs: number;
  maxAgeMs: number;
  fetch: typeof fetch;
  now: () => number;
  /** Most known realms held; the least recently used is dropped. Default 1000. */
  maxRealms?: number;
  timeoutMs?: number;
}

export class JwksCache {
  private readonly known = new Map<string, Entry>();
  private readonly unknown = new Map<string, number>(); // realm → when it answered 404
  private readonly probes = new Map<string, Promise<Entry>>(); // first fetches in flight
  private readonly takeBudget: () => boolean;

  constructor(private readonly o: JwksCacheOptions) {
    this.takeBudget = tokenBucket(NEW_REALMS_PER_SECOND, NEW_REALM_BURST, o.now);
  }

  /** A jose key function for this tenant's realm. */
  keyFor(tenant: string): KeyFn {
    return (header, token) => this.getKey(tenant, header, token);
  }

  clear(): void {
    this.known.clear();
    this.unknown.clear();
    this.probes.clear();
  }

  private async getKey(tenant: string, header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<KeyLike> {
    const e = this.known.get(tenant) ?? (await this.probe(tenant));
    setCapped(this.known, tenant, e, this.o.maxRealms ?? 1000); // most recently used last
    if (this.o.now() - e.fetchedAt >= this.o.maxAgeMs) await this.refresh(tenant, e);
    const tried = e.keys;
    try {
      return await tried(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      // Keys rotated by someone else's refetch while we waited: use those.
      if (e.keys !== tried) return e.keys(header, token);
      await this.refresh(tenant, e);
      if (e.keys === tried) throw err;
      return e.keys(header, token);
    }
  }

  /** First fetch of a realm not known yet: the negative cache and the shared budget come first. */
  private probe(tenant: string): Promise<Entry> {
    const inFlight = this.probes.get(tenant);
    if (inFlight) return inFlight;
    const failedAt = this.unknown.get(tenant);
    if (failedAt !== undefined && this.o.now() - failedAt < UNKNOWN_REALM_TTL_MS) {
      return Promise.reject(new UnknownRealmError('realm answered 404 recently'));
    }
    if (!this.takeBudget()) return Promise.reject(new JwksBudgetError('too many realms not known yet'));
    const p = this.fetchKeys(tenant)
      .then(
        (keys) => {
          this.unknown.delete(tenant);
          const at = this.o.now();
          return { keys, fetchedAt: at, attemptedAt: at };
        },
        (err: Error) => this.failed(tenant, err),
      )
      .finally(() => this.probes.delete(tenant));
    this.probes.set(tenant, p);
    return p;
  }

  /** Single-flight refetch of a known realm, at most once per cooldown; an outage keeps the old keys. */
  private refresh(tenant: string, e: Entry): Promise<void> {
    if (e.pending) return e.pending;
    if (this.o.now() - e.attemptedAt < this.o.cooldownMs) return Promise.resolve();
    e.attemptedAt = this.o.now();
    e.pending = this.fetchKeys(tenant)
      .then(
        (keys) => {
          e.keys = keys;
          e.fetchedAt = this.o.now();
        },
        (err: Error) => {
          if (err instanceof UnknownRealmError) this.failed(tenant, err);
        },
      )
      .finally(() => {
        e.pending = undefined;
      });
    return e.pending;
  }

  /** A realm that answered 404 is no longer known and is remembered as unknown. */
  private failed(tenant: string, err: Error): never {
    if (err instanceof UnknownRealmError) {
      this.known.delete(tenant);
      setCapped(this.unknown, tenant, this.o.now(), MAX_UNKNOWN_REALMS);
    }
    throw err;
  }

  private async fetchKeys(tenant: string): Promise<KeyFn> {
    const url = `${realmUrl(this.o.authUrl, tenant)}/protocol/openid-connect/certs`;
    let res: Response;
    try {
      res = await this.o.fetch(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 5000),
      });
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
}

/** Sets `key` as the most recent entry, dropping the least recent when over `max`. */
function setCapped<V>(m: Map<string, V>, key: string, value: V, max: number): void {
  m.delete(key);
  m.set(key, value);
  if (m.size > max) m.delete(m.keys().next().value as string);
}

/** A token bucket: `perSecond` tokens a second, at most `burst` saved; true when one was taken. */
function tokenBucket(perSecond: number, burst: number, now: () => number): () => boolean {
  let tokens = burst;
  let at = now();
  return () => {
    const t = now();
    tokens = Math.min(burst, tokens + (Math.max(0, t - at) / 1000) * perSecond);
    at = t;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}
