// The audit trail (HIPAA 45 CFR 164.312(b)): one event per upgrade refusal or acceptance, per session
// lifecycle step and per usage API call (repeats of a refusal or call folded into one with a count),
// written as JSON lines (AUDIT_LOG_FILE or stdout) and kept per known tenant for GET /v1/audit (Redis,
// or process memory), bounded in bytes per tenant and in all. Never audio, transcripts, configs or
// tokens: event.ts copies only its named fields.
import type { RedisSettings } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';
import { trustedProxyList } from './address.js';
import { linkKeyOf } from './event.js';
import { fileSink, stdoutSink } from './sink.js';
import { MemoryAuditStore } from './memory-store.js';
import type { AuditStore } from './store.js';
import { AuditTrail } from './trail.js';

export { AuditTrail, type AuditPageQuery } from './trail.js';
export type { AuditEvent, AuditEventName, AuditInput, TrailMode } from './event.js';
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
  /** AUDIT_STORE_MAX_BYTES: the query store's bytes in all (default 1 GiB in Redis, 32 MiB in memory). */
  maxBytes?: number;
  /** AUDIT_STORE_TENANT_MAX_BYTES: a tenant's trail at most (default 64 MiB), and its share of maxBytes. */
  tenantMaxBytes?: number;
  /** AUDIT_COALESCE_SECONDS: identical refusals and API calls within it are one event (default 60). */
  coalesceSeconds?: number;
  now?: () => number;
}

const DAY_MS = 86_400_000;
const MIB = 1024 * 1024;

export async function createAudit(o: AuditOptions): Promise<AuditTrail> {
  const now = o.now ?? Date.now;
  const retentionMs = Math.max(1, o.retentionDays) * DAY_MS;
  const sink = o.file ? fileSink(o.file) : stdoutSink();
  const proxies = { hops: o.trustedProxies, list: trustedProxyList(o.trustedProxyCidrs ?? []) };
  if (proxies.hops > 0 && !proxies.list)
    o.logger.warn(
      'TRUSTED_PROXIES is set without TRUSTED_PROXY_CIDRS: X-Forwarded-For is trusted from no peer; the audit trail records the socket peer',
    );
  const trail = (store: AuditStore) =>
    new AuditTrail({
      sink,
      store,
      proxies,
      linkKey: linkKeyOf(o.clusterSecret),
      coalesceMs: (o.coalesceSeconds ?? 60) * 1000,
      log: o.logger,
      now,
    });
  const limits = (totalDefault: number) => ({
    totalBytes: o.maxBytes ?? totalDefault,
    tenantBytes: o.tenantMaxBytes ?? 64 * MIB,
  });
  if (!o.redis) {
    o.logger.warn(
      'no Redis (REDIS_URL or REDIS_SENTINELS): the audit events GET /v1/audit answers are in process memory (bounded, lost on restart)',
    );
    return trail(new MemoryAuditStore(retentionMs, limits(32 * MIB), now));
  }
  // Imported only with Redis: a single replica never loads ioredis.
  const { RedisAuditStore } = await import('./redis-store.js');
  const store = new RedisAuditStore(o.redis, o.keyPrefix ?? 'sg:audit:', retentionMs, limits(1024 * MIB), now);
  await store.connect(2000).catch((err: Error) => {
    // ioredis keeps reconnecting; until then store writes fail and are counted (the sink has every event).
    o.logger.warn({ err: err.message }, 'redis not reachable at start; audit events reach the store once it is');
  });
  return trail(store);
}
