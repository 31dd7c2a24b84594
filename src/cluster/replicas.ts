// Replica liveness: each replica keeps `sgw:replica:<id>` = its internal address in Redis with a short
// TTL, refreshed well within it, and deletes it at exit. A replica whose key is gone (killed, crashed,
// cut off from Redis for longer than the TTL) is dead: its resumable sessions may be taken over.
// Without Redis there is one replica and every other one is dead.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient as Redis } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';

export const HEARTBEAT_TTL_MS = 5000;
export const HEARTBEAT_EVERY_MS = 1500;

export interface Replicas {
  /** this replica's id (REPLICA_ID, or `<hostname>-<pid>-<random>`) */
  readonly id: string;
  /** this replica's internal address (ADVERTISE_URL, or ws://127.0.0.1:<ADMIN_PORT>); set by start() */
  readonly url: string;
  /** begins the heartbeat (the first beat awaited), once the server listens at `url` */
  start(url: string): Promise<void>;
  /** whether replica `id` is alive: its heartbeat is in Redis (rejects when Redis does not answer) */
  alive(id: string): Promise<boolean>;
  /** stops the heartbeat and deletes this replica's key */
  close(): Promise<void>;
}

export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

const heartbeatKey = (id: string) => `sgw:replica:${id}`;

/** Liveness in a Redis shared with the other replicas; without one, only this replica is alive. */
export function createReplicas(id: string, logger: Logger, redis?: Redis): Replicas {
  let url = '';
  let timer: NodeJS.Timeout | undefined;
  let failing = false;
  const beat = () =>
    redis!.set(heartbeatKey(id), url, 'PX', HEARTBEAT_TTL_MS).then(
      () => {
        if (failing) logger.info({ event: 'heartbeat_restored' }, 'replica heartbeat written again');
        failing = false;
      },
      (err: Error) => {
        // Said once per outage: a beat fails every 1.5 s while Redis is away.
        if (!failing)
          logger.warn(
            { event: 'heartbeat_failed', err: err.message },
            'replica heartbeat not written; other replicas see this one as dead after 5 s',
          );
        failing = true;
      },
    );
  return {
    id,
    get url() {
      return url;
    },
    async start(at) {
      url = at;
      if (!redis || timer) return;
      timer = setInterval(beat, HEARTBEAT_EVERY_MS);
      timer.unref();
      await beat();
    },
    alive: async (other) => other === id || (redis !== undefined && (await redis.exists(heartbeatKey(other))) === 1),
    async close() {
      clearInterval(timer);
      await redis?.del(heartbeatKey(id)).catch(() => undefined);
    },
  };
}
