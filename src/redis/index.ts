// Where Redis is and how to reach it, in one typed object the usage ledger, the cluster and the audit
// store share: a single Redis (REDIS_URL), a primary found through Sentinel (REDIS_SENTINELS), or a
// Redis Cluster (REDIS_CLUSTER_NODES). No runtime import of ioredis here: a gateway without Redis
// never loads it (about 10 MB of RSS).
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';

/** The client every Redis user takes: one connection (single Redis, Sentinel) or a Cluster client. With
 * a Cluster, every script and multi-key command must keep to one slot (hash tags). */
export type RedisClient = Redis | Cluster;

export interface SentinelAddress {
  host: string;
  port: number;
}

/** REDIS_URL; or REDIS_SENTINELS + REDIS_SENTINEL_NAME with the optional passwords and TLS; or a Cluster. */
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
      /** TLS to the sentinels and the data nodes, trusted as REDIS_URL's rediss:// is */
      tls?: boolean;
    }
  | {
      /** some nodes of the cluster: the client learns the others from them */
      clusterNodes: SentinelAddress[];
      /** the nodes' ACL user and password */
      username?: string;
      password?: string;
      /** TLS to every node, trusted as REDIS_URL's rediss:// is (system CAs, NODE_EXTRA_CA_CERTS) */
      tls?: boolean;
    };

/** Whether these settings name a Redis Cluster. */
export const isClusterSettings = (s: RedisSettings): s is Extract<RedisSettings, { clusterNodes: unknown }> =>
  'clusterNodes' in s;

/** The settings from the validated configuration, or undefined: no Redis, everything in process. */
export function redisSettings(c: {
  REDIS_URL?: string;
  REDIS_SENTINELS?: SentinelAddress[];
  REDIS_SENTINEL_NAME?: string;
  REDIS_USERNAME?: string;
  REDIS_PASSWORD?: string;
  REDIS_SENTINEL_PASSWORD?: string;
  REDIS_CLUSTER_NODES?: SentinelAddress[];
  REDIS_CLUSTER_TLS?: boolean;
  REDIS_SENTINEL_TLS?: boolean;
}): RedisSettings | undefined {
  if (c.REDIS_URL) return { url: c.REDIS_URL };
  if (c.REDIS_CLUSTER_NODES) {
    return {
      clusterNodes: c.REDIS_CLUSTER_NODES,
      username: c.REDIS_USERNAME,
      password: c.REDIS_PASSWORD,
      tls: c.REDIS_CLUSTER_TLS ?? false,
    };
  }
  if (!c.REDIS_SENTINELS || !c.REDIS_SENTINEL_NAME) return undefined;
  return {
    sentinels: c.REDIS_SENTINELS,
    name: c.REDIS_SENTINEL_NAME,
    username: c.REDIS_USERNAME,
    password: c.REDIS_PASSWORD,
    sentinelPassword: c.REDIS_SENTINEL_PASSWORD,
    ...(c.REDIS_SENTINEL_TLS ? { tls: true } : {}),
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

/** ioredis's classes, passed in by the caller so that only a gateway with Redis loads them. */
export interface RedisClasses {
  Redis: typeof Redis;
  Cluster: typeof Cluster;
}

/** A fail-fast client for these settings: the same behaviour with one Redis, through Sentinel or with a
 * Cluster. */
export function newRedis(classes: RedisClasses, s: RedisSettings): RedisClient {
  if (isClusterSettings(s)) return new classes.Cluster(s.clusterNodes, clusterOptions(s));
  const RedisClass = classes.Redis;
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
    // TLS to the sentinels, and to the primary they name.
    ...(s.tls ? { sentinelTLS: {}, enableTLSForSentinelMode: true, tls: {} } : {}),
  });
}

/** Cluster: the nodes' connections fail fast as a single Redis does; the client itself queues nothing
 * while the cluster is not ready, and asks the nodes again at the same pace. Managed services (TLS,
 * nodes announced by name) need the names kept as they are: no DNS lookup before the TLS handshake. */
function clusterOptions(s: Extract<RedisSettings, { clusterNodes: unknown }>): ClusterOptions {
  const { lazyConnect, retryStrategy, ...perNode } = FAIL_FAST;
  void retryStrategy; // the cluster client reconnects the nodes itself (clusterRetryStrategy)
  return {
    lazyConnect,
    enableOfflineQueue: false,
    // Commands of one tick go to each node in one write: a ledger batch spreads over every shard.
    enableAutoPipelining: true,
    clusterRetryStrategy: (attempt) => Math.min(50 * attempt, 500),
    // A primary lost: a few tries (slots refreshed between them), then the command fails and the ledger's
    // events go to the journal, rather than waiting out the whole failover in memory.
    retryDelayOnFailover: 100,
    maxRedirections: 6,
    retryDelayOnClusterDown: 200,
    slotsRefreshTimeout: 2000,
    // ioredis learns a moved slot only when every command of a pipeline met the same MOVED; a pipeline
    // where others succeeded leaves its map stale with no refresh (its interval is off by default).
    // Asking every 2 s bounds how long commands go to a node that no longer serves their slot.
    slotsRefreshInterval: 2000,
    dnsLookup: (address, callback) => callback(null, address),
    redisOptions: {
      ...perNode,
      username: s.username,
      password: s.password,
      ...(s.tls ? { tls: {} } : {}),
    },
  };
}

/** An error's message, with what the last node answered when a Cluster client could reach none of them
 * ("Failed to refresh slots cache." alone says nothing of WRONGPASS or a certificate not trusted). */
function reason(err: Error): string {
  const last = (err as Error & { lastNodeError?: Error }).lastNodeError;
  return last ? `${err.message} (${last.message})` : err.message;
}

/**
 * connect(), rejecting with why: ioredis rejects with "Connection is closed." whatever the cause, and
 * the 'error' event just before it says it (WRONGPASS, a certificate not trusted, ECONNREFUSED). At
 * most `timeoutMs`: through Sentinel, connect() waits as long as no sentinel names a primary it can
 * reach (a wrong sentinel password, every sentinel away), where a single Redis would refuse at once.
 * ioredis goes on trying after the timeout; commands fail fast until it is connected.
 */
export async function connectRedis(redis: RedisClient, timeoutMs: number): Promise<void> {
  let cause: Error | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onError = (err: Error) => (cause ??= err);
  const timedOut = new Error('timed out');
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timedOut), timeoutMs)));
  redis.on('error', onError);
  try {
    await Promise.race([redis.connect(), timeout]);
  } catch (err) {
    if (err === timedOut) throw new Error(`timed out${cause ? ` (${reason(cause)})` : ''}`, { cause: err });
    const e = (cause ?? err) as Error;
    throw e.message === reason(e) ? e : new Error(reason(e), { cause: e });
  } finally {
    clearTimeout(timer);
    redis.off('error', onError);
  }
}
