// Session records: what another replica needs to take a resumable session over (its owner, the
// identity its key is bound to, the validated config, the container's initialization data, where
// the client's timeline stands, usage so far). In Redis under sgw:rec:<sha256(key)> so the raw
// key is never stored; no token, ever. The client's content (config, container headers, audio
// bytes of an open Cluster, missed messages, its subject) is sealed with a key derived from the
// resume key (sealed.ts), which Redis never sees; what is in clear is ids, states and numbers.
// A new keyed session claims its key here before its socket is accepted (claimKey), so one key
// names one session. Ownership changes are compare-and-set in Lua, so two replicas never both take
// a session over. A record nobody refreshes expires (TTL); a handed-over one is also listed by its
// deadline for the janitor, which ends its ledger session and releases its slot when nobody resumed it.
// What Redis returns is input: a record is used only as this version writes it, its MAC right when
// there is a CLUSTER_SECRET (record-codec.ts); the sealed content is bound to the whole clear head
// besides (takeover.ts), so without the resume key no field of it can be changed unnoticed.
import { createHash } from 'node:crypto';
import type { RedisClient as Redis } from '../redis/index.js';
import type { ClusterKeys } from './authenticity.js';
import { LEGACY_RECORDS_READ_UNTIL, RecordCodec, type RecordRejection } from './record-codec.js';
import type { Continuation } from '../audio/index.js';
import type { Endpoint } from '../protocol/index.js';
import type { SessionSnapshot } from '../session/index.js';

export type RecordState = 'live' | 'handing_over' | 'handed_over';

/** The client's content in a record: sealed before it leaves the process (see SealedRecord). */
export interface RecordContent {
  subject?: string;
  environment?: string;
  /** the client's validated config, and what the first CONFIG_ACCEPTED told it */
  config?: unknown;
  accepted?: SessionSnapshot['accepted'];
  /** the client's container headers (base64): what a successor parses the rest of the stream with */
  init?: string;
  /** only when handed over: where the successor's parser goes on (the open WebM Cluster's head, base64) */
  cont?: string;
  /** only when handed over: the client-bound messages produced after its socket was closed */
  missed?: string[];
}

/** Where the session's timeline stands (numbers only): the snapshot without its content. */
export type RecordTimeline = Omit<SessionSnapshot, 'config' | 'accepted' | 'init' | 'continuation'> & {
  /** only when handed over: where the next media unit starts if the client's bytes do continue */
  contExpect?: Continuation['expect'];
};

/** What a record holds in clear: who owns the session and whose it is (ids), and its timeline. */
export interface RecordHead {
  owner: string;
  /** the owner's address when it wrote: read by the release before only, which hops to it (this one
   *  hops to the address of the owner's own signed heartbeat, replicas.ts) */
  ownerUrl: string;
  state: RecordState;
  tenant: string;
  endpoint: Endpoint;
  interactionId?: string;
  /** the ledger's session id, also the tenant limiter's slot */
  sessionKey: string;
  /** absent while the key is only claimed: the session has nothing another replica could go on with yet */
  timeline?: RecordTimeline;
  updatedAt: number;
}

/** A record as Redis holds it: the head, and the content sealed (sealed.ts). Version 3 binds the
 *  whole head to the seal; version 2 (the release before) bound four of its fields, and is read only
 *  while LEGACY_RECORDS_UNTIL says a rolling update from it may still be under way. */
export interface SealedRecord extends RecordHead {
  v: 2 | 3;
  sealed: string;
}

/** A record with its content opened (only with the resume key). */
export interface SessionRecord extends RecordHead, RecordContent {}

export interface RecordStore {
  /** Redis (every replica sees the records) or in process (one replica: nothing to hand over to). */
  readonly shared: boolean;
  get(keyHash: string): Promise<SealedRecord | undefined>;
  /** Several records at once (the owner's periodic check of its own): one MGET per 500 keys on one
   *  Redis; on Redis Cluster, where each record is in a slot of its own, one GET each. */
  getMany(keyHashes: string[]): Promise<Array<SealedRecord | undefined>>;
  /** Whether getMany reads many records in one command (not on Redis Cluster). */
  readonly batchedReads: boolean;
  /** A new session's claim of its key: only when no record is there, or (`replaceOwner`) the one
   *  there is only a claim of that owner (dead, or not holding its session). */
  claimKey(keyHash: string, r: SealedRecord, replaceOwner?: string): Promise<boolean>;
  /** The owner's write: only when the record is absent or `r.owner` owns it; a bare claim (no
   *  timeline) over a record with one only keeps that alive. With `deadlineMs`, the janitor ends it
   *  then unless someone claimed it (a handed-over record). */
  put(keyHash: string, r: SealedRecord, deadlineMs?: number): Promise<boolean>;
  /** Keeps a record alive for another TTL without rewriting it (false: it is gone). */
  touch(keyHash: string): Promise<boolean>;
  /** Takes the record over when it is still as `expect` says (owner and state). */
  claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SealedRecord): Promise<boolean>;
  /** The owner's delete (the session finished here). */
  remove(keyHash: string, owner: string): Promise<void>;
  /** Handed-over records past their deadline, each removed and returned to one caller only. */
  reap(now: number): Promise<SealedRecord[]>;
  /** Replica `replica`'s positions (positions.ts): set, delete, and (`expire`) keep the hash alive a TTL. */
  writePositions(replica: string, set: Map<string, string>, del: string[], expire: boolean): Promise<void>;
  /** The position replica `owner` last wrote for a record, or undefined. */
  position(owner: string, keyHash: string): Promise<string | undefined>;
}

/** The raw key never leaves the process: records are found by its hash. */
export function recordKeyHash(resumeKey: string): string {
  return createHash('sha256').update(resumeKey).digest('hex');
}

const REC = 'sgw:rec:';
const DEADLINES = 'sgw:rec-deadlines';
const POSITIONS = 'sgw:pos:';
/** Records reaped per janitor pass (the rest wait for the next pass). */
const REAP_BATCH = 50;
/** Keys per MGET, fields per HSET: a bound on one command's size. */
const BATCH = 500;

/** A record's field in its owner's positions hash: 64 bits of its key hash (two of a replica's few
 *  thousand sessions share one about once in 10^12 replicas), a quarter of the bytes at every write. */
export const positionField = (keyHash: string) => keyHash.slice(0, 16);

// Each script touches only its record's key (KEYS[1]), so that each runs on Redis Cluster too; the
// deadline index is kept by separate commands (see put, claim, remove, reap).
// KEYS[1] record; ARGV: value, ttlMs, owner whose bare claim may be replaced ('' = none).
const CLAIM_KEY = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local r = cjson.decode(cur)
  if ARGV[3] == '' or r.owner ~= ARGV[3] or r.timeline ~= nil then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`;
// KEYS[1] record; ARGV: owner, value, ttlMs, '1' when value is a bare claim (no timeline), which
// never replaces a record with one: it only keeps that one alive.
const PUT = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local r = cjson.decode(cur)
  if r.owner ~= ARGV[1] then return 0 end
  if ARGV[4] == '1' and r.timeline ~= nil then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return 1
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`;
// KEYS[1] record; ARGV: expected owner, expected state, value, ttlMs.
const CLAIM = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.owner ~= ARGV[1] or r.state ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
return 1
`;
// KEYS[1] record; ARGV: owner.
const REMOVE = `
local cur = redis.call('GET', KEYS[1])
if cur and cjson.decode(cur).owner == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;
// KEYS[1] record. The one caller whose DEL removes a record still handed over gets it.
const REAP = `
local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).state ~= 'handed_over' then return false end
redis.call('DEL', KEYS[1])
return cur
`;

type Scripted = Redis & {
  recClaimKey(key: string, ...a: (string | number)[]): Promise<number>;
  recPut(key: string, ...a: (string | number)[]): Promise<number>;
  recClaim(key: string, ...a: (string | number)[]): Promise<number>;
  recRemove(key: string, ...a: (string | number)[]): Promise<number>;
  recReap(key: string): Promise<string | null>;
};

class RedisRecordStore implements RecordStore {
  readonly shared = true;
  readonly batchedReads: boolean;
  private readonly redis: Scripted;

  constructor(
    redis: Redis,
    private readonly ttlMs: number,
    private readonly codec: RecordCodec,
  ) {
    redis.defineCommand('recClaimKey', { numberOfKeys: 1, lua: CLAIM_KEY });
    redis.defineCommand('recPut', { numberOfKeys: 1, lua: PUT });
    redis.defineCommand('recClaim', { numberOfKeys: 1, lua: CLAIM });
    redis.defineCommand('recRemove', { numberOfKeys: 1, lua: REMOVE });
    redis.defineCommand('recReap', { numberOfKeys: 1, lua: REAP });
    this.redis = redis as Scripted;
    this.batchedReads = !(redis as { isCluster?: boolean }).isCluster;
  }

  async get(keyHash: string): Promise<SealedRecord | undefined> {
    const v = await this.redis.get(REC + keyHash);
    return v ? this.codec.decode(v) : undefined;
  }

  async getMany(keyHashes: string[]): Promise<Array<SealedRecord | undefined>> {
    const keys = keyHashes.map((h) => REC + h);
    const values: Array<string | null> = [];
    if (!this.batchedReads) values.push(...(await Promise.all(keys.map((k) => this.redis.get(k)))));
    else for (let i = 0; i < keys.length; i += BATCH) values.push(...(await this.redis.mget(keys.slice(i, i + BATCH))));
    return values.map((v) => (v ? this.codec.decode(v) : undefined));
  }

  async claimKey(keyHash: string, r: SealedRecord, replaceOwner?: string): Promise<boolean> {
    return (await this.redis.recClaimKey(REC + keyHash, this.codec.encode(r), this.ttlMs, replaceOwner ?? '')) === 1;
  }

  async put(keyHash: string, r: SealedRecord, deadlineMs?: number): Promise<boolean> {
    const value = this.codec.encode(r);
    const ok = (await this.redis.recPut(REC + keyHash, r.owner, value, this.ttlMs, r.timeline ? '' : '1')) === 1;
    // Listed after the write: a janitor that finds the listing finds the handed-over record.
    if (ok && deadlineMs !== undefined) await this.redis.zadd(DEADLINES, deadlineMs, keyHash);
    return ok;
  }

  async touch(keyHash: string): Promise<boolean> {
    return (await this.redis.pexpire(REC + keyHash, this.ttlMs)) === 1;
  }

  async claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SealedRecord): Promise<boolean> {
    const key = REC + keyHash;
    if ((await this.redis.recClaim(key, expect.owner, expect.state, this.codec.encode(next), this.ttlMs)) !== 1)
      return false;
    // A listing left behind (this delete failed) is dropped by the janitor: the record is no longer handed over.
    await this.redis.zrem(DEADLINES, keyHash).catch(() => undefined);
    return true;
  }

  async remove(keyHash: string, owner: string): Promise<void> {
    await this.redis.recRemove(REC + keyHash, owner);
    await this.redis.zrem(DEADLINES, keyHash);
  }

  async reap(now: number): Promise<SealedRecord[]> {
    const due = await this.redis.zrangebyscore(DEADLINES, '-inf', now, 'LIMIT', 0, REAP_BATCH);
    const out: SealedRecord[] = [];
    for (const keyHash of due) {
      const v = await this.redis.recReap(REC + keyHash);
      await this.redis.zrem(DEADLINES, keyHash);
      const r = v ? this.codec.decode(v) : undefined;
      if (r) out.push(r);
    }
    return out;
  }

  async writePositions(replica: string, set: Map<string, string>, del: string[], expire: boolean): Promise<void> {
    const key = POSITIONS + replica;
    const p = this.redis.pipeline();
    const pairs = [...set].flat();
    for (let i = 0; i < pairs.length; i += 2 * BATCH) p.hset(key, ...pairs.slice(i, i + 2 * BATCH));
    for (let i = 0; i < del.length; i += BATCH) p.hdel(key, ...del.slice(i, i + BATCH));
    if (expire) p.pexpire(key, this.ttlMs);
    const replies = (await p.exec()) ?? [];
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0]!;
  }

  async position(owner: string, keyHash: string): Promise<string | undefined> {
    return (await this.redis.hget(POSITIONS + owner, positionField(keyHash))) ?? undefined;
  }
}

/** One replica: the same rules in a Map (tests, and a gateway without REDIS_URL). */
class MemoryRecordStore implements RecordStore {
  readonly shared = false;
  readonly batchedReads = true;
  private readonly records = new Map<string, { value: string; expires: number; deadline?: number }>();
  private readonly positions = new Map<string, Map<string, string>>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly codec: RecordCodec,
  ) {}

  private current(keyHash: string): SealedRecord | undefined {
    const e = this.records.get(keyHash);
    if (e && e.expires <= this.now()) this.records.delete(keyHash);
    return e && e.expires > this.now() ? this.codec.decode(e.value) : undefined;
  }

  async get(keyHash: string): Promise<SealedRecord | undefined> {
    return this.current(keyHash);
  }

  async getMany(keyHashes: string[]): Promise<Array<SealedRecord | undefined>> {
    return keyHashes.map((h) => this.current(h));
  }

  async touch(keyHash: string): Promise<boolean> {
    const e = this.current(keyHash) && this.records.get(keyHash);
    if (e) e.expires = this.now() + this.ttlMs;
    return e !== undefined;
  }

  async writePositions(replica: string, set: Map<string, string>, del: string[]): Promise<void> {
    const mine = this.positions.get(replica) ?? new Map<string, string>();
    for (const [field, value] of set) mine.set(field, value);
    for (const field of del) mine.delete(field);
    this.positions.set(replica, mine);
  }

  async position(owner: string, keyHash: string): Promise<string | undefined> {
    return this.positions.get(owner)?.get(positionField(keyHash));
  }

  async claimKey(keyHash: string, r: SealedRecord, replaceOwner?: string): Promise<boolean> {
    const cur = this.current(keyHash);
    if (cur && (cur.owner !== replaceOwner || cur.timeline)) return false;
    this.records.set(keyHash, { value: this.codec.encode(r), expires: this.now() + this.ttlMs });
    return true;
  }

  async put(keyHash: string, r: SealedRecord, deadlineMs?: number): Promise<boolean> {
    const cur = this.current(keyHash);
    if (cur && cur.owner !== r.owner) return false;
    const keep = cur?.timeline && !r.timeline; // a bare claim keeps a record with a timeline alive, no more
    this.records.set(keyHash, {
      value: this.codec.encode(keep ? cur : r),
      expires: this.now() + this.ttlMs,
      deadline: keep ? this.records.get(keyHash)?.deadline : deadlineMs,
    });
    return true;
  }

  async claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SealedRecord): Promise<boolean> {
    const cur = this.current(keyHash);
    if (!cur || cur.owner !== expect.owner || cur.state !== expect.state) return false;
    this.records.set(keyHash, { value: this.codec.encode(next), expires: this.now() + this.ttlMs });
    return true;
  }

  async remove(keyHash: string, owner: string): Promise<void> {
    if (this.current(keyHash)?.owner === owner) this.records.delete(keyHash);
  }

  async reap(now: number): Promise<SealedRecord[]> {
    const out: SealedRecord[] = [];
    for (const [keyHash, e] of this.records) {
      if (e.deadline === undefined || e.deadline > now) continue;
      this.records.delete(keyHash);
      const r = this.codec.decode(e.value);
      if (r?.state === 'handed_over') out.push(r);
    }
    return out;
  }
}

/** Records live RESUME_GRACE_SECONDS + 30 s past their last write or touch. */
export const recordTtlMs = (graceSeconds: number) => Math.round((graceSeconds + 30) * 1000);

export interface RecordStoreOptions {
  redis?: Redis;
  graceSeconds: number;
  /** CLUSTER_SECRET's keys: every record carries a MAC, and one without a right one is not read */
  keys?: ClusterKeys;
  /** LEGACY_RECORDS_UNTIL (ms since the epoch); default LEGACY_RECORDS_READ_UNTIL */
  legacyUntil?: number;
  now?: () => number;
  /** a stored value not used, and why (counted and logged by the cluster) */
  rejected?: (why: RecordRejection) => void;
}

export function createRecordStore(o: RecordStoreOptions): RecordStore {
  const ttlMs = recordTtlMs(o.graceSeconds);
  const now = o.now ?? Date.now;
  const codec = new RecordCodec({
    keys: o.keys,
    legacyUntil: o.legacyUntil ?? LEGACY_RECORDS_READ_UNTIL,
    now,
    rejected: (why) => o.rejected?.(why),
  });
  return o.redis ? new RedisRecordStore(o.redis, ttlMs, codec) : new MemoryRecordStore(ttlMs, now, codec);
}
