// Audit events in Redis: one sorted set per tenant (score: the event's time, scorer), its byte count
// beside it, trimmed at each write (redis-trim.ts) to the retention and to the tenant's bytes: its own
// bound and its share of the total, the total divided among the tenants that have a trail (the set
// `<prefix>.trails`). A new tenant's trail makes every share smaller: this replica then trims every
// trail to it, as it does at start (trails written before byte bounds shrink to them). Each script
// touches one trail and its count, in one Cluster slot (the trail keeps its name: a hash tag would
// hide the events already kept). Loaded only with Redis (ioredis is about 10 MB of RSS).
import { Cluster, Redis } from 'ioredis';
import { connectRedis, newRedis, type RedisClient, type RedisSettings } from '../redis/index.js';
import type { AuditEvent } from './event.js';
import { byteCountKey, TRIM } from './redis-trim.js';
import {
  memberOf,
  pageOf,
  scorer,
  shareOf,
  type AuditCursor,
  type AuditPage,
  type AuditQuery,
  type AuditStore,
  type StoreLimits,
} from './store.js';

/** Bytes a member costs besides its own: Redis's skiplist node and dictionary entry, about. */
const MEMBER_OVERHEAD = 64;
/** Members one write removes at most (a sweep calls again until the trail is within its bytes). */
const REMOVED_A_WRITE = 256;
const REMOVED_A_SWEEP_CALL = 5000;
/** How often the count of trails is read again (another replica may have added one). */
const TRAILS_REFRESH_MS = 60_000;

type TrimFn = (...args: Array<string | number>) => Promise<number>;

export class RedisAuditStore implements AuditStore {
  private readonly redis: RedisClient & { auditTrim: TrimFn };
  private readonly registered = new Set<string>();
  private readonly trailsKey: string;
  private trails = 1;
  private trailsReadAt = 0;
  private sweeping?: Promise<void>;
  private sweepAgain = false;
  private readonly scoreOf = scorer();
  private adopted = false;

  constructor(
    settings: RedisSettings,
    private readonly prefix: string,
    private readonly retentionMs: number,
    private readonly limits: StoreLimits,
    private readonly now: () => number,
  ) {
    // Commands fail at once while Redis is away (the caller counts the failure); no offline queue to grow.
    const redis = newRedis({ Redis, Cluster }, settings);
    redis.defineCommand('auditTrim', { numberOfKeys: 2, lua: TRIM });
    redis.on('error', () => undefined); // each failing command says so where it is used
    this.redis = redis as RedisClient & { auditTrim: TrimFn };
    this.trailsKey = `${prefix.replace(/:$/, '')}.trails`;
  }

  /** Rejects with why, or after `timeoutMs` (connectRedis). Then trims every trail to its share. */
  async connect(timeoutMs: number): Promise<void> {
    await connectRedis(this.redis, timeoutMs);
    this.settle();
  }

  /** Once Redis answers (at start, or at the first write if it was away then): the trails of a
   * release before adopted, and every trail trimmed to its share. A failed sweep is done again at the
   * next new trail. */
  private settle(): void {
    if (this.adopted) return;
    this.adopted = true;
    void this.adoptTrails()
      .then(() => this.sweep())
      .catch(() => undefined);
  }

  /** Trails written before the set of trails existed (a release without byte bounds): found once, by
   * SCAN on every primary, and counted, so the sweep trims them too. */
  private async adoptTrails(): Promise<void> {
    if ((await this.redis.exists(this.trailsKey)) === 1) return;
    const match = `${this.prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    for (const node of nodes) {
      for await (const keys of node.scanStream({ match, type: 'zset', count: 1000 }) as AsyncIterable<string[]>) {
        const tenants = keys.map((k) => k.slice(this.prefix.length));
        if (tenants.length > 0) await this.redis.sadd(this.trailsKey, ...tenants);
      }
    }
  }

  private key(tenant: string): string {
    return `${this.prefix}${tenant}`;
  }

  async add(tenant: string, e: AuditEvent, at: number, create: boolean): Promise<void> {
    const score = this.scoreOf(at); // now: the order the events happened in, whatever order the writes land in
    await this.readTrails();
    const share = shareOf(this.limits, this.trails + (this.registered.has(tenant) ? 0 : 1));
    const bytes = await this.trim(tenant, share, REMOVED_A_WRITE, score, memberOf(e), create);
    this.settle();
    if (bytes >= 0 && !this.registered.has(tenant)) await this.register(tenant);
  }

  /** Read in slices from the cursor's score: members of that same score up to the cursor are skipped. */
  async range(q: AuditQuery): Promise<AuditPage> {
    const oldest = Math.max(q.from, this.now() - this.retentionMs) * 1000;
    const min = q.after ? Math.max(q.after.score, oldest) : oldest;
    const max = `(${q.to * 1000}`;
    const found: AuditCursor[] = [];
    for (let offset = 0; ;) {
      const slice = q.limit + 1 + 16;
      const raw = await this.redis.zrangebyscore(this.key(q.tenant), min, max, 'WITHSCORES', 'LIMIT', offset, slice);
      for (let i = 0; i < raw.length; i += 2) found.push({ member: raw[i], score: Number(raw[i + 1]) });
      offset += raw.length / 2;
      const page = pageOf(found, q);
      if (page.next || raw.length / 2 < slice) return page;
    }
  }

  /** Resolves once a sweep under way (at start, after a new trail) is done. */
  async settled(): Promise<void> {
    while (this.sweeping) await this.sweeping;
  }

  async close(): Promise<void> {
    await this.settled().catch(() => undefined);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  /** The trail's bytes after adding `member` (none: '') and trimming to `bytes`; -1: it has no trail. */
  private trim(tenant: string, bytes: number, removals: number, score = 0, member = '', create = false) {
    const key = this.key(tenant);
    const oldest = (this.now() - this.retentionMs) * 1000;
    return this.redis.auditTrim(
      key,
      byteCountKey(key),
      score,
      member,
      oldest,
      bytes,
      this.retentionMs,
      create ? 1 : 0,
      MEMBER_OVERHEAD,
      removals,
    );
  }

  private async readTrails(force = false): Promise<void> {
    if (!force && this.now() - this.trailsReadAt < TRAILS_REFRESH_MS) return;
    this.trailsReadAt = this.now();
    const before = this.trails;
    this.trails = Math.max(1, await this.redis.scard(this.trailsKey));
    if (this.trails > before && !force) void this.sweep().catch(() => undefined);
  }

  /** A tenant's first trail in this process: counted among the trails; a new one shrinks every share. */
  private async register(tenant: string): Promise<void> {
    this.registered.add(tenant);
    if ((await this.redis.sadd(this.trailsKey, tenant)) === 0) return;
    await this.readTrails(true);
    void this.sweep().catch(() => undefined);
  }

  /** Every trail trimmed to its share; tenants whose trail expired are no longer counted. Asked for
   * while one runs (a trail added meanwhile), another runs after it. */
  private sweep(): Promise<void> {
    if (this.sweeping) {
      this.sweepAgain = true;
      return this.sweeping;
    }
    this.sweeping = this.sweepOnce().finally(() => {
      this.sweeping = undefined;
      if (!this.sweepAgain) return;
      this.sweepAgain = false;
      void this.sweep().catch(() => undefined);
    });
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    const tenants = await this.redis.smembers(this.trailsKey);
    this.trails = Math.max(1, tenants.length);
    const share = shareOf(this.limits, this.trails);
    for (const tenant of tenants) {
      let bytes = await this.trim(tenant, share, REMOVED_A_SWEEP_CALL);
      for (let calls = 1; bytes > share && calls < 10_000; calls++)
        bytes = await this.trim(tenant, share, REMOVED_A_SWEEP_CALL);
      if (bytes >= 0) continue;
      await this.redis.srem(this.trailsKey, tenant);
      this.registered.delete(tenant); // registered again at its next event
    }
  }
}
