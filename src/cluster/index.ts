// Sessions that outlive their replica: session records (records.ts), replica liveness (replicas.ts)
// and the internal hop between replicas (hop.ts), on one Redis connection of their own (or none: a
// single replica, everything in process). The one way in.
import { connectRedis, type RedisClient as Redis, type RedisSettings } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';
import { loadRedisUsageStore } from '../usage/index.js';
import type { HopDeps } from './hop.js';
import { createUsedSignatures } from './hop-signatures.js';
export { hopUrl, signHop, verifyHop } from './hop-signatures.js';
import { clusterKeys } from './authenticity.js';
import { metrics } from '../telemetry/index.js';
import type { RecordRejection } from './record-codec.js';
import { createRecordStore, recordTtlMs, type RecordStore } from './records.js';
import { Positions } from './positions.js';
import { createReplicas, defaultReplicaId, type Replicas } from './replicas.js';

export { acceptHop, hopUpgrade, HopOutbox, HopRelay, type HopDeps, type HopOutcome, type HopIdentity } from './hop.js';
export { createReplicas, type Replicas } from './replicas.js';
export {
  createRecordStore,
  recordKeyHash,
  type RecordStore,
  type SealedRecord,
  type SessionRecord,
  type RecordState,
} from './records.js';
export {
  awaitHandover,
  claimKey,
  countTakeover,
  findResume,
  handOver,
  keepRecord,
  restoreOf,
  type ResumeRoute,
  type TakeoverDeps,
} from './takeover.js';
export { openRecord, recordKeys, sealRecord } from './record-seal.js';
export { addressRefuses } from './owner-probe.js';
export { startJanitor } from './janitor.js';

export interface ClusterOptions {
  /** REDIS_URL or Sentinel; unset: one replica, everything in process */
  redis?: RedisSettings;
  /** REPLICA_ID */
  replicaId?: string;
  /** ADVERTISE_URL; default ws://127.0.0.1:<the admin port listened on> */
  advertiseUrl?: string;
  /** CLUSTER_SECRET */
  secret?: string;
  /** LEGACY_RECORDS_UNTIL (ms since the epoch): version-2 records are read until then */
  legacyRecordsUntil?: number;
  graceSeconds: number;
  logger: Logger;
}

export interface Cluster {
  readonly replicas: Replicas;
  readonly records: RecordStore;
  /** where this replica's resumable sessions stand, written in batches (positions.ts) */
  readonly positions: Positions;
  readonly hop: HopDeps;
  /** The server listens, the hop on `adminPort`: this replica's heartbeat begins. */
  start(adminPort: number): Promise<void>;
  /** At exit, after the drain: the heartbeat stops and its key goes. */
  close(): Promise<void>;
}

export async function createCluster(o: ClusterOptions): Promise<Cluster> {
  const redis = o.redis ? await connect(o.redis, o.logger) : undefined;
  const keys = clusterKeys(o.secret);
  const replicas = createReplicas(o.replicaId ?? defaultReplicaId(), o.logger, redis, keys?.heartbeats);
  const records = createRecordStore({
    redis,
    graceSeconds: o.graceSeconds,
    keys,
    legacyUntil: o.legacyRecordsUntil,
    rejected: rejectedRecords(o.logger),
  });
  // A record is kept alive three times within its TTL, at most every 20 s.
  const touchEveryMs = Math.min(20_000, recordTtlMs(o.graceSeconds) / 3);
  const positions = new Positions(records, () => replicas.id, o.logger, touchEveryMs);
  return {
    replicas,
    records,
    positions,
    hop: { secret: o.secret, used: createUsedSignatures(redis), replicas, logger: o.logger },
    start: (adminPort) => replicas.start(o.advertiseUrl ?? `ws://127.0.0.1:${adminPort}`),
    async close() {
      positions.close();
      await replicas.close();
      redis?.disconnect();
    },
  };
}

/** A record read from Redis and not used: counted, and logged at most once a minute (a flood of
 *  forged values must not flood the log). */
function rejectedRecords(logger: Logger): (why: RecordRejection) => void {
  let loggedAt = -Infinity;
  return (why) => {
    metrics.recordsRejected.inc({ reason: why });
    if (Date.now() - loggedAt < 60_000) return;
    loggedAt = Date.now();
    logger.warn(
      { event: 'record_rejected', reason: why },
      'a session record in Redis is not one a replica wrote (MAC, version or shape); not used',
    );
  };
}

/** The usage ledger's kind of connection (fails fast while Redis is away, reconnects quickly). */
async function connect(settings: RedisSettings, logger: Logger): Promise<Redis> {
  const { createRedisClient } = await loadRedisUsageStore(); // only with Redis (idle memory)
  const redis = createRedisClient(settings);
  redis.on('error', () => undefined); // each failing command says so where it is used
  await connectRedis(redis, 2000).catch((err: Error) =>
    logger.warn({ err: err.message }, 'redis not reachable at start; replicas and session records wait for it'),
  );
  return redis;
}
