// Replica liveness: each replica keeps `sgw:replica:<id>` = its internal address in Redis with a short
// TTL, refreshed well within it, and deletes it at exit. A replica whose key is gone (killed, crashed,
// cut off from Redis for longer than the TTL) is dead: its resumable sessions may be taken over.
// Without Redis there is one replica and every other one is dead.
// The address is where another replica carries a resume (the internal hop, with the client's audio
// and the session's output): with CLUSTER_SECRET the heartbeat is signed (its id, address and time
// under an HMAC of the secret's heartbeat key), and only a signed one recent enough gives an address.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient as Redis } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';
import { hmac, macMatches } from './authenticity.js';

export const HEARTBEAT_TTL_MS = 5000;
export const HEARTBEAT_EVERY_MS = 1500;
/** A signed heartbeat older (or newer) than this gives no address: a copied old one is not a live
 *  address. Well above the TTL, for clocks that differ between nodes. */
const HEARTBEAT_MAX_AGE_MS = 60_000;

export interface Replicas {
  /** this replica's id (REPLICA_ID, or `<hostname>-<pid>-<random>`) */
  readonly id: string;
  /** this replica's internal address (ADVERTISE_URL, or ws://127.0.0.1:<ADMIN_PORT>); set by start() */
  readonly url: string;
  /** begins the heartbeat (the first beat awaited), once the server listens at `url` */
  start(url: string): Promise<void>;
  /** whether replica `id` is alive: its heartbeat is in Redis (rejects when Redis does not answer) */
  alive(id: string): Promise<boolean>;
  /** replica `id`'s internal address as its own heartbeat says, signed when there is a CLUSTER_SECRET;
   *  undefined when there is no heartbeat, or no signed one that is right */
  address(id: string): Promise<string | undefined>;
  /** stops the heartbeat and deletes this replica's key */
  close(): Promise<void>;
}

export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

const heartbeatKey = (id: string) => `sgw:replica:${id}`;

const signature = (key: Buffer, id: string, url: string, at: number) =>
  hmac(key, `${id}\n${url}\n${at}`).toString('hex');

/** The heartbeat's value: the address alone, or with a key `{url, at, mac}`. */
function heartbeatValue(key: Buffer | undefined, id: string, url: string, now: number): string {
  return key ? JSON.stringify({ url, at: now, mac: signature(key, id, url, now) }) : url;
}

/** The address a heartbeat value gives: with a key, only a signed one of this id, recent enough. */
export function heartbeatAddress(key: Buffer | undefined, id: string, value: string, now: number): string | undefined {
  if (!value.startsWith('{')) return key ? undefined : value; // a bare address (no secret where it was written)
  let h: { url?: unknown; at?: unknown; mac?: unknown };
  try {
    h = JSON.parse(value) as typeof h;
  } catch {
    return undefined;
  }
  if (typeof h?.url !== 'string' || typeof h.at !== 'number' || typeof h.mac !== 'string') return undefined;
  if (!key) return h.url; // no secret here: no hop is made, the address only probed
  const fresh = Math.abs(now - h.at) <= HEARTBEAT_MAX_AGE_MS;
  return fresh && macMatches(Buffer.from(signature(key, id, h.url, h.at), 'hex'), h.mac) ? h.url : undefined;
}

/** Liveness in a Redis shared with the other replicas; without one, only this replica is alive.
 *  `key`: CLUSTER_SECRET's heartbeat key. */
export function createReplicas(id: string, logger: Logger, redis?: Redis, key?: Buffer): Replicas {
  let url = '';
  let timer: NodeJS.Timeout | undefined;
  let failing = false;
  const beat = () =>
    redis!.set(heartbeatKey(id), heartbeatValue(key, id, url, Date.now()), 'PX', HEARTBEAT_TTL_MS).then(
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
    async address(other) {
      if (other === id) return url;
      const value = redis && (await redis.get(heartbeatKey(other)));
      return value ? heartbeatAddress(key, other, value, Date.now()) : undefined;
    },
    async close() {
      clearInterval(timer);
      await redis?.del(heartbeatKey(id)).catch(() => undefined);
    },
  };
}
