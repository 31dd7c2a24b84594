// Audit events in Redis: one sorted set per tenant (score: the event's time, scoreOf), trimmed at
// each write to the retention and to a bound per tenant, and expiring whole once a tenant has written
// nothing for the retention. Every command and transaction touches that one key, so a Redis Cluster
// takes them as they are (the key keeps its name: a hash tag would hide the events already kept). Loaded only with Redis (ioredis is about 10 MB of RSS).
import { Cluster, Redis } from 'ioredis';
import { connectRedis, newRedis, type RedisClient, type RedisSettings } from '../redis/index.js';
import type { AuditEvent } from './event.js';
import {
  memberOf,
  pageOf,
  scoreOf,
  type AuditCursor,
  type AuditPage,
  type AuditQuery,
  type AuditStore,
} from './store.js';

export class RedisAuditStore implements AuditStore {
  private readonly redis: RedisClient;

  constructor(
    settings: RedisSettings,
    private readonly prefix: string,
    private readonly retentionMs: number,
    private readonly maxPerTenant: number,
    private readonly now: () => number,
  ) {
    // Commands fail at once while Redis is away (the caller counts the failure); no offline queue to grow.
    this.redis = newRedis({ Redis, Cluster }, settings);
    this.redis.on('error', () => undefined); // each failing command says so where it is used
  }

  /** Rejects with why, or after `timeoutMs` (connectRedis). */
  connect(timeoutMs: number): Promise<void> {
    return connectRedis(this.redis, timeoutMs);
  }

  private key(tenant: string): string {
    return `${this.prefix}${tenant}`;
  }

  async add(tenant: string, e: AuditEvent, at: number): Promise<void> {
    const key = this.key(tenant);
    const oldest = (this.now() - this.retentionMs) * 1000;
    await this.redis
      .multi()
      .zadd(key, scoreOf(at), memberOf(e))
      .zremrangebyscore(key, '-inf', `(${oldest}`)
      .zremrangebyrank(key, 0, -this.maxPerTenant - 1)
      .pexpire(key, this.retentionMs)
      .exec();
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

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
