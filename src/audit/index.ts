// The audit trail (HIPAA 45 CFR 164.312(b)): one event per upgrade refusal or acceptance, per session
// lifecycle step and per usage API call, written as JSON lines (AUDIT_LOG_FILE or stdout) and kept per
// tenant for GET /v1/audit (Redis, or bounded in process memory). Never audio, transcripts, configs
// or tokens: event.ts copies only its named fields.
import type { RedisSettings } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';
import { trustedProxyList } from './address.js';
import { linkKeyOf } from './event.js';
import { fileSink, stdoutSink } from './sink.js';
import { MemoryAuditStore } from './store.js';
import { AuditTrail } from './trail.js';

export { AuditTrail, type AuditPageQuery } from './trail.js';
export type { AuditEvent, AuditEventName, AuditInput } from './event.js';
export { clientAddress, trustedProxyList, type Origin } from './address.js';
export { sessionWho, type AuditedInfo } from './session.js';

export interface AuditOptions {
  /** AUDIT_LOG_FILE; unset: stdout */
  file?: string;
  /** REDIS_URL or Sentinel; unset: events kept in process memory */
  redis?: RedisSettings;
  retentionDays: number;
  /** TRUSTED_PROXIES */
  trustedProxies: number;
  /** TRUSTED_PROXY_CIDRS: X-Forwarded-For is read only from a peer in these */
  trustedProxyCidrs?: readonly string[];
  /** CLUSTER_SECRET: resume links alike on every replica; unset, a random key of this process's */
  clusterSecret?: string;
  logger: Logger;
  /** Prefix of every Redis key (default 'sg:audit:'). */
  keyPrefix?: string;
  /** Without Redis: events kept in memory, all tenants (default 100 000). */
  maxMemoryEvents?: number;
  /** With Redis: events kept per tenant (default 5 000 000). */
  maxPerTenant?: number;
  now?: () => number;
}

const DAY_MS = 86_400_000;

export async function createAudit(o: AuditOptions): Promise<AuditTrail> {
  const now = o.now ?? Date.now;
  const retentionMs = Math.max(1, o.retentionDays) * DAY_MS;
  const sink = o.file ? fileSink(o.file) : stdoutSink();
  const linkKey = linkKeyOf(o.clusterSecret);
  const proxies = { hops: o.trustedProxies, list: trustedProxyList(o.trustedProxyCidrs ?? []) };
  if (proxies.hops > 0 && !proxies.list)
    o.logger.warn(
      'TRUSTED_PROXIES is set without TRUSTED_PROXY_CIDRS: X-Forwarded-For is trusted from no peer; the audit trail records the socket peer',
    );
  if (!o.redis) {
    o.logger.warn(
      'no Redis (REDIS_URL or REDIS_SENTINELS): the audit events GET /v1/audit answers are in process memory (bounded, lost on restart)',
    );
    const store = new MemoryAuditStore(retentionMs, o.maxMemoryEvents ?? 100_000, now);
    return new AuditTrail(sink, store, { proxies, linkKey }, o.logger, now);
  }
  // Imported only with Redis: a single replica never loads ioredis.
  const { RedisAuditStore } = await import('./redis-store.js');
  const store = new RedisAuditStore(o.redis, o.keyPrefix ?? 'sg:audit:', retentionMs, o.maxPerTenant ?? 5_000_000, now);
  await store.connect(2000).catch((err: Error) => {
    // ioredis keeps reconnecting; until then store writes fail and are counted (the sink has every event).
    o.logger.warn({ err: err.message }, 'redis not reachable at start; audit events reach the store once it is');
  });
  return new AuditTrail(sink, store, { proxies, linkKey }, o.logger, now);
}
