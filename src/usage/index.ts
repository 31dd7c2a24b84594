// Usage: the credit ledger (Redis, or in process), per-tenant session limits, and the ops usage
// API. createUsage wires them to one Redis connection (or none) and one on-disk journal.
import { connectRedis, isClusterSettings, type RedisSettings } from '../redis/index.js';
import { isLedgerTotals, logger, setLedgerTotals } from '../telemetry/index.js';
import { UsageHttpApi, type AuditLog, type UsageApi } from './api.js';
import { loadApiTokens } from './api-tokens.js';
import { Journal } from './journal.js';
import { Ledger, type Health, type UsageLedger } from './ledger.js';
import { MemoryLimiter, RedisLimiter, type SessionLimiter } from './limiter.js';
import { MemoryUsageStore } from './memory-store.js';
import { RedisHealth } from './redis-health.js';
import type { UsageStore } from './model.js';
import type { ScriptedRedis } from './redis-store.js';

export type { Outcome, SessionStart, SpeechCoverage } from './model.js';
export type { SessionEnd, UsageLedger, UsageRecord } from './ledger.js';
export { MAX_SEGMENTS, fromMicro, toMicro } from './model.js';
export type { SessionLimiter } from './limiter.js';
export type { AuditLog, UsageApi, UsageRequest } from './api.js';
/** The Redis-backed store and its client, loaded on first use: only a gateway with Redis loads
 * ioredis (about 10 MB of RSS). */
export const loadRedisUsageStore = () => import('./redis-store.js');

export interface UsageOptions {
  /** REDIS_URL, Sentinel or Cluster; unset: the ledger and limits in process */
  redis?: RedisSettings;
  journalDir: string;
  retentionDays: number;
  maxSessionsPerTenant: number;
  /** USAGE_API_TOKEN: reads every tenant */
  apiToken?: string;
  /** USAGE_API_TOKENS_FILE / USAGE_API_TOKENS: tokens that read only their tenants (api-tokens.ts) */
  apiTokensFile?: string;
  apiTokens?: string;
  /** where every usage API call is audited, and what GET /v1/audit reads */
  audit?: AuditLog;
  now?: () => number;
  /** Prefix of every Redis key (default 'sg:usage:'); lets tests and deployments share a Redis. */
  keyPrefix?: string;
  /** Session lease lifetime and renewal period (defaults 30 s and 10 s). */
  leaseTtlMs?: number;
  leaseRenewMs?: number;
  /** Journal bounds (defaults 100 000 events, 50 MB); beyond them the newest events are refused. */
  journalMaxEvents?: number;
  journalMaxBytes?: number;
  /** How long start-up waits for Redis before going on with the journal (default 2 s). */
  connectTimeoutMs?: number;
}

export interface Usage {
  ledger: UsageLedger;
  limiter: SessionLimiter;
  api: UsageApi;
  close(): Promise<void>;
}

const DAY_MS = 86_400_000;

export async function createUsage(o: UsageOptions): Promise<Usage> {
  const now = o.now ?? Date.now;
  const retentionMs = Math.max(1, o.retentionDays) * DAY_MS;
  const tokens = loadApiTokens({ all: o.apiToken, file: o.apiTokensFile, inline: o.apiTokens });

  if (!o.redis) {
    logger.warn(
      'no Redis (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): usage ledger and session limits are in process (single replica only, lost on restart)',
    );
    const store = new MemoryUsageStore(retentionMs, now);
    const alwaysUp: Health = { healthy: true, markFailed: () => undefined, onHealthy: () => undefined };
    const ledger = new Ledger(store, null, alwaysUp);
    const limiter = new MemoryLimiter(o.maxSessionsPerTenant);
    const unreport = reportTotals(store);
    const close = once(async () => {
      unreport();
      await ledger.flush();
      await limiter.close();
    });
    ledger.close = close;
    return { ledger, limiter, api: new UsageHttpApi(store, tokens, o.audit), close };
  }

  const prefix = o.keyPrefix ?? 'sg:usage:';
  // First: a directory another gateway process holds stops the start before anything connects.
  const journal = await Journal.open(o.journalDir, {
    maxEvents: o.journalMaxEvents ?? 100_000,
    maxBytes: o.journalMaxBytes ?? 50 * 1024 * 1024,
  });
  // Imported only with Redis: a single replica never loads ioredis (about 10 MB of RSS).
  const { RedisUsageStore, createRedisClient } = await import('./redis-store.js');
  const redis = createRedisClient(o.redis);
  const health = new RedisHealth(redis);
  await connectRedis(redis, o.connectTimeoutMs ?? 2000).catch((err: Error) => {
    // ioredis keeps reconnecting; until then events go to the journal.
    logger.warn({ err: err.message }, 'redis not reachable at start; usage events go to the journal until it is');
  });
  const migrated = isClusterSettings(o.redis) ? Promise.resolve() : migrateOnce(redis, prefix);
  if (redis.status === 'ready') await migrated;

  const store = new RedisUsageStore(redis, prefix, retentionMs, now);
  const ledger = new Ledger(store, journal, after(migrated, health));
  const limiter = new RedisLimiter(redis, prefix, o.maxSessionsPerTenant, {
    ttlMs: o.leaseTtlMs ?? 30_000,
    renewMs: o.leaseRenewMs ?? 10_000,
  });
  const unreport = reportTotals(store);
  const close = once(async () => {
    unreport();
    await ledger.flush();
    await limiter.close();
    health.close();
    await redis.quit().catch(() => redis.disconnect());
    if (journal.depth > 0) logger.warn({ events: journal.depth }, 'usage journal left for the next start to replay');
    await journal.close();
  });
  ledger.close = close;
  return { ledger, limiter, api: new UsageHttpApi(store, tokens, o.audit), close };
}

/**
 * A single Redis or Sentinel may hold the ledger in the layout from before Cluster support: moved once
 * (migrate.ts) before the first event is written, when Redis is first ready. Resolves when it is done
 * (or failed: logged, and tried again at the next start).
 */
async function migrateOnce(redis: ScriptedRedis, prefix: string): Promise<void> {
  const { migrateLedgerKeys } = await import('./migrate.js');
  // Not events.once: that rejects on the 'error' events of every failed reconnect.
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  await migrateLedgerKeys(redis, prefix).catch((err: Error) =>
    logger.error({ err: err.message }, 'usage ledger key migration failed; it runs again at the next start'),
  );
}

/** `health`, but unhealthy until `done` settles: until then the ledger's events go to the journal. */
function after(done: Promise<void>, health: Health): Health {
  let ready = false;
  const waiting: (() => void)[] = [];
  void done.finally(() => {
    ready = true;
    if (health.healthy) waiting.forEach((f) => f());
  });
  return {
    get healthy() {
      return ready && health.healthy;
    },
    markFailed: (reason) => health.markFailed(reason),
    onHealthy(f) {
      waiting.push(f);
      health.onHealthy(() => ready && f());
    },
  };
}

/** The store's credit totals feed speech_gateway_ledger_credits until the returned function is called. */
function reportTotals(store: UsageStore): () => void {
  const totals = () => store.creditTotals();
  setLedgerTotals(totals);
  return () => isLedgerTotals(totals) && setLedgerTotals(null);
}

function once(f: () => Promise<void>): () => Promise<void> {
  let p: Promise<void> | null = null;
  return () => (p ??= f());
}
