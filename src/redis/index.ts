// Where Redis is and how to reach it, in one typed object the usage ledger, the cluster and the audit
// store share: a single Redis (REDIS_URL) or a primary found through Sentinel (REDIS_SENTINELS). No
// runtime import of ioredis here: a gateway without Redis never loads it (about 10 MB of RSS).
import type { Redis, RedisOptions } from 'ioredis';

export interface SentinelAddress {
  host: string;
  port: number;
}

/** REDIS_URL, or REDIS_SENTINELS + REDIS_SENTINEL_NAME with the optional passwords. */
export type RedisSettings =
  | { url: string }
  | {
      sentinels: SentinelAddress[];
      /** the primary's name the sentinels monitor */
      name: string;
      /** the data nodes' ACL user and password */
      username?: string;
      password?: string;
      /** the sentinels' own AUTH */
      sentinelPassword?: string;
    };

/** The settings from the validated configuration, or undefined: no Redis, everything in process. */
export function redisSettings(c: {
  REDIS_URL?: string;
  REDIS_SENTINELS?: SentinelAddress[];
  REDIS_SENTINEL_NAME?: string;
  REDIS_USERNAME?: string;
  REDIS_PASSWORD?: string;
  REDIS_SENTINEL_PASSWORD?: string;
}): RedisSettings | undefined {
  if (c.REDIS_URL) return { url: c.REDIS_URL };
  if (!c.REDIS_SENTINELS || !c.REDIS_SENTINEL_NAME) return undefined;
  return {
    sentinels: c.REDIS_SENTINELS,
    name: c.REDIS_SENTINEL_NAME,
    username: c.REDIS_USERNAME,
    password: c.REDIS_PASSWORD,
    sentinelPassword: c.REDIS_SENTINEL_PASSWORD,
  };
}

/** Fail fast instead of queueing in memory while Redis is away (the usage journal keeps the ledger's
 * events), and reconnect quickly: limits fall back to per-replica counting until it is back. */
const FAIL_FAST: RedisOptions = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  commandTimeout: 3000,
  connectTimeout: 2000,
  retryStrategy: (attempt) => Math.min(50 * attempt, 500),
};

/** A fail-fast client for these settings: the same behaviour with one Redis or through Sentinel. The
 * caller passes ioredis's class, so that only a gateway with Redis loads it. */
export function newRedis(RedisClass: typeof Redis, s: RedisSettings): Redis {
  if ('url' in s) return new RedisClass(s.url, FAIL_FAST);
  return new RedisClass({
    ...FAIL_FAST,
    sentinels: s.sentinels,
    name: s.name,
    username: s.username,
    password: s.password,
    sentinelPassword: s.sentinelPassword,
    // Every sentinel away: ask them again at the pace of a lost single Redis.
    sentinelRetryStrategy: (attempt) => Math.min(50 * attempt, 500),
    // A primary demoted by a failover answers READONLY: reconnect, and the sentinels name the new one.
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
    // A planned failover leaves the old primary taking writes until it is demoted (seconds later, and
    // those writes are then lost): move to the new primary as soon as a sentinel announces the switch.
    failoverDetector: true,
  });
}

/**
 * connect(), rejecting with why: ioredis rejects with "Connection is closed." whatever the cause, and
 * the 'error' event just before it says it (WRONGPASS, a certificate not trusted, ECONNREFUSED). At
 * most `timeoutMs`: through Sentinel, connect() waits as long as no sentinel names a primary it can
 * reach (a wrong sentinel password, every sentinel away), where a single Redis would refuse at once.
 * ioredis goes on trying after the timeout; commands fail fast until it is connected.
 */
export async function connectRedis(redis: Redis, timeoutMs: number): Promise<void> {
  let cause: Error | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onError = (err: Error) => (cause ??= err);
  const timedOut = new Error('timed out');
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timedOut), timeoutMs)));
  redis.on('error', onError);
  try {
    await Promise.race([redis.connect(), timeout]);
  } catch (err) {
    if (err === timedOut) throw new Error(`timed out${cause ? ` (${cause.message})` : ''}`, { cause: err });
    throw cause ?? err;
  } finally {
    clearTimeout(timer);
    redis.off('error', onError);
  }
}
