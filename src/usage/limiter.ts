// Concurrent sessions per tenant. Across replicas: a Redis sorted set per tenant of
// sessionKey → lease expiry, taken atomically in Lua and renewed while held, so a replica that
// dies leaks its slots only until their leases expire. Without Redis, or while it is
// unreachable, an in-process count (fail open per replica rather than refuse every session);
// slots taken that way become Redis leases once Redis is back, so the cap sees them.
// Renewal is per tenant, not per session: one script call re-adds all of this replica's leases of a
// tenant (at most RENEW_BATCH a call), in the tenant's slot (keys.ts).
import { once } from 'node:events';
import { logger } from '../telemetry/index.js';
import { tenantKeys } from './keys.js';
import type { ScriptedRedis } from './redis-store.js';

/** Leases re-added by one renewal call at most: a bounded command, however many sessions a tenant has here. */
export const RENEW_BATCH = 500;

export interface SessionLimiter {
  /** Taken when a session's config arrives (not at its socket's open); false: the tenant is at its cap. */
  acquire(tenant: string, sessionKey: string): Promise<boolean>;
  /** The tenant's sessions fill the cap now: a new socket can be refused before its upgrade. Takes
   *  nothing: acquire() at config time is what holds the cap. */
  atCap(tenant: string): Promise<boolean>;
  release(tenant: string, sessionKey: string): Promise<void>;
  /** A session taken over from another replica keeps the slot it holds (no cap check): renewed here from now on. */
  adopt(tenant: string, sessionKey: string): Promise<void>;
  /** A session handed over to another replica: its slot stays taken for `holdMs` (until a replica adopts or
   *  releases it), no longer renewed here. */
  handOff(tenant: string, sessionKey: string, holdMs: number): Promise<void>;
  close(): Promise<void>;
}

export class MemoryLimiter implements SessionLimiter {
  private readonly held = new Map<string, Set<string>>();

  constructor(private readonly max: number) {}

  async acquire(tenant: string, sessionKey: string): Promise<boolean> {
    if (this.max <= 0) return true;
    let s = this.held.get(tenant);
    if (!s) this.held.set(tenant, (s = new Set()));
    if (s.has(sessionKey)) return true;
    if (s.size >= this.max) return false;
    s.add(sessionKey);
    return true;
  }

  async atCap(tenant: string): Promise<boolean> {
    return this.max > 0 && (this.held.get(tenant)?.size ?? 0) >= this.max;
  }

  async release(tenant: string, sessionKey: string): Promise<void> {
    const s = this.held.get(tenant);
    s?.delete(sessionKey);
    if (s && s.size === 0) this.held.delete(tenant);
  }

  async adopt(tenant: string, sessionKey: string): Promise<void> {
    if (this.max <= 0) return;
    if (!this.held.has(tenant)) this.held.set(tenant, new Set());
    this.held.get(tenant)!.add(sessionKey);
  }

  /** One process: nobody to hand the slot to. */
  async handOff(tenant: string, sessionKey: string): Promise<void> {
    await this.release(tenant, sessionKey);
  }

  async close(): Promise<void> {
    this.held.clear();
  }

  tenantOf(sessionKey: string): string | undefined {
    for (const [tenant, keys] of this.held) if (keys.has(sessionKey)) return tenant;
    return undefined;
  }
}

export interface LeaseOptions {
  ttlMs: number;
  renewMs: number;
  /** How long an acquire waits for a reconnecting Redis before counting locally (default 750 ms). */
  reconnectWaitMs?: number;
}

export class RedisLimiter implements SessionLimiter {
  private readonly held = new Map<string, string>(); // sessionKey → tenant, leases in Redis
  private readonly local: MemoryLimiter;
  private readonly localKeys = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly prefix: string,
    private readonly max: number,
    private readonly lease: LeaseOptions,
  ) {
    this.local = new MemoryLimiter(max);
    redis.on('ready', () => this.renew());
  }

  private key(tenant: string): string {
    return tenantKeys(this.prefix, tenant).leases;
  }

  async acquire(tenant: string, sessionKey: string): Promise<boolean> {
    if (this.max <= 0) return true;
    try {
      await this.ready();
      const ok = (await this.redis.leaseAcquire(this.key(tenant), sessionKey, this.max, this.lease.ttlMs)) === 1;
      if (ok) {
        this.held.set(sessionKey, tenant);
        this.startRenewing();
      }
      return ok;
    } catch (err) {
      logger.warn(
        { err: (err as Error).message, tenant },
        'session limit: redis unavailable, counting in this replica only',
      );
      const ok = await this.local.acquire(tenant, sessionKey);
      if (ok) {
        this.localKeys.add(sessionKey);
        this.startRenewing();
      }
      return ok;
    }
  }

  async atCap(tenant: string): Promise<boolean> {
    if (this.max <= 0) return false;
    if (this.redis.status !== 'ready') return this.local.atCap(tenant);
    // Leases carry Redis's clock; this replica's is close enough for an early answer that acquire() settles.
    const live = await this.redis.zcount(this.key(tenant), Date.now(), '+inf').catch(() => 0);
    return live >= this.max;
  }

  async release(tenant: string, sessionKey: string): Promise<void> {
    if (this.localKeys.delete(sessionKey)) return this.local.release(tenant, sessionKey);
    if (!this.held.delete(sessionKey)) return;
    if (this.held.size === 0 && this.localKeys.size === 0) this.stopRenewing();
    // If this fails the lease simply expires.
    await this.redis.zrem(this.key(tenant), sessionKey).catch(() => undefined);
  }

  async adopt(tenant: string, sessionKey: string): Promise<void> {
    if (this.max <= 0) return;
    this.held.set(sessionKey, tenant);
    this.startRenewing();
    await this.redis.leaseRenew(this.key(tenant), this.lease.ttlMs, sessionKey).catch(() => undefined);
  }

  async handOff(tenant: string, sessionKey: string, holdMs: number): Promise<void> {
    if (this.localKeys.delete(sessionKey)) return this.local.release(tenant, sessionKey);
    if (!this.held.delete(sessionKey)) return;
    await this.redis
      .leaseRenew(this.key(tenant), Math.max(holdMs, this.lease.ttlMs), sessionKey)
      .catch(() => undefined);
  }

  async close(): Promise<void> {
    this.stopRenewing();
    const held = [...this.held];
    this.held.clear();
    if (held.length > 0 && this.redis.status === 'ready') {
      const byTenant = groupByTenant(held);
      await Promise.all(
        [...byTenant].map(([tenant, keys]) => this.redis.zrem(this.key(tenant), ...keys).catch(() => undefined)),
      );
    }
    await this.local.close();
    this.localKeys.clear();
  }

  /**
   * Waits briefly for a reconnecting Redis: right after Redis returns, sessions counted only
   * locally would break the cross-replica cap. ioredis retries at least every 500 ms, so a
   * short wait catches the reconnect; during a long outage each new session pays this wait.
   */
  private async ready(): Promise<void> {
    if (this.redis.status === 'ready') return;
    const wait = this.lease.reconnectWaitMs ?? 750;
    if (wait <= 0 || this.redis.status === 'end') throw new Error(`redis ${this.redis.status}`);
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), wait);
    try {
      await once(this.redis, 'ready', { signal: ac.signal });
    } catch {
      throw new Error(`redis ${this.redis.status}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private startRenewing(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.renew(), this.lease.renewMs);
    this.timer.unref();
  }

  private stopRenewing(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private renew(): void {
    if (this.redis.status !== 'ready') return;
    // Slots counted locally while Redis was away become leases now (the sessions are running).
    for (const sessionKey of this.localKeys) {
      const tenant = this.local.tenantOf(sessionKey);
      if (tenant !== undefined) {
        void this.local.release(tenant, sessionKey);
        this.held.set(sessionKey, tenant);
      }
    }
    this.localKeys.clear();
    for (const [tenant, keys] of groupByTenant(this.held)) {
      for (let i = 0; i < keys.length; i += RENEW_BATCH) {
        this.redis
          .leaseRenew(this.key(tenant), this.lease.ttlMs, ...keys.slice(i, i + RENEW_BATCH))
          .catch((err: Error) => logger.warn({ err: err.message }, 'session lease renewal failed'));
      }
    }
  }
}

/** sessionKey → tenant pairs as tenant → its session keys. */
function groupByTenant(held: Iterable<[string, string]>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [sessionKey, tenant] of held) {
    const keys = out.get(tenant);
    if (keys) keys.push(sessionKey);
    else out.set(tenant, [sessionKey]);
  }
  return out;
}
