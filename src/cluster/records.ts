// Session records: what another replica needs to take a resumable session over (its owner, the
// identity its key is bound to, the validated config, the container's initialization data, where
// the client's timeline stands, usage so far). In Redis under sgw:rec:<sha256(key)> so the raw
// key is never stored; no token, ever; no audio (what the owner held unfinalised dies with it).
// Ownership changes are compare-and-set in Lua, so two replicas never both take a session over.
// A record nobody refreshes expires (TTL); a handed-over one is also listed by its deadline for
// the janitor, which ends its ledger session and releases its slot when nobody resumed it.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Continuation } from '../audio/index.js';
import type { Endpoint } from '../protocol/index.js';
import type { SessionSnapshot } from '../session/index.js';

export type RecordState = 'live' | 'handing_over' | 'handed_over';

/** A session's snapshot (see SessionSnapshot) with who owns it and whom its key is bound to; the
 * snapshot's buffers are kept as base64. */
export interface SessionRecord extends Omit<SessionSnapshot, 'init' | 'continuation'> {
  v: 1;
  owner: string;
  ownerUrl: string;
  state: RecordState;
  tenant: string;
  subject?: string;
  endpoint: Endpoint;
  interactionId?: string;
  environment?: string;
  /** the ledger's session id, also the tenant limiter's slot */
  sessionKey: string;
  /** the client's container headers: what a successor parses the rest of the stream with */
  init: string;
  /** only when handed over: where the successor's parser goes on (the open WebM Cluster's head),
   *  and where the next media unit starts if the client's bytes do continue */
  cont?: string;
  contExpect?: Continuation['expect'];
  /** only when handed over: the client-bound messages produced after its socket was closed */
  missed?: string[];
  updatedAt: number;
}

export interface RecordStore {
  /** Redis (every replica sees the records) or in process (one replica: nothing to hand over to). */
  readonly shared: boolean;
  get(keyHash: string): Promise<SessionRecord | undefined>;
  /** The owner's write: only when the record is absent or `r.owner` owns it. With `deadlineMs`, the
   *  janitor ends it then unless someone claimed it (a handed-over record). */
  put(keyHash: string, r: SessionRecord, deadlineMs?: number): Promise<boolean>;
  /** Takes the record over when it is still as `expect` says (owner and state). */
  claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SessionRecord): Promise<boolean>;
  /** The owner's delete (the session finished here). */
  remove(keyHash: string, owner: string): Promise<void>;
  /** Handed-over records past their deadline, each removed and returned to one caller only. */
  reap(now: number): Promise<SessionRecord[]>;
}

/** The raw key never leaves the process: records are found by its hash. */
export function recordKeyHash(resumeKey: string): string {
  return createHash('sha256').update(resumeKey).digest('hex');
}

const REC = 'sgw:rec:';
const DEADLINES = 'sgw:rec-deadlines';
/** Records reaped per janitor pass (the rest wait for the next pass). */
const REAP_BATCH = 50;

// KEYS[1] record; ARGV: owner, value, ttlMs, member, deadline ('' = none).
const PUT = `
local cur = redis.call('GET', KEYS[1])
if cur and cjson.decode(cur).owner ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[5] ~= '' then redis.call('ZADD', '${DEADLINES}', ARGV[5], ARGV[4]) end
return 1
`;
// KEYS[1] record; ARGV: expected owner, expected state, value, ttlMs, member.
const CLAIM = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.owner ~= ARGV[1] or r.state ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
redis.call('ZREM', '${DEADLINES}', ARGV[5])
return 1
`;
// KEYS[1] record; ARGV: owner, member.
const REMOVE = `
local cur = redis.call('GET', KEYS[1])
if cur and cjson.decode(cur).owner == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('ZREM', '${DEADLINES}', ARGV[2])
return 1
`;
// KEYS[1] record; ARGV: member. One caller wins the ZREM; it gets a record still handed over.
const REAP = `
if redis.call('ZREM', '${DEADLINES}', ARGV[1]) == 0 then return false end
local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).state ~= 'handed_over' then return false end
redis.call('DEL', KEYS[1])
return cur
`;

type Scripted = Redis & {
  recPut(key: string, ...a: (string | number)[]): Promise<number>;
  recClaim(key: string, ...a: (string | number)[]): Promise<number>;
  recRemove(key: string, ...a: (string | number)[]): Promise<number>;
  recReap(key: string, member: string): Promise<string | null>;
};

class RedisRecordStore implements RecordStore {
  readonly shared = true;
  private readonly redis: Scripted;

  constructor(redis: Redis, private readonly ttlMs: number) {
    redis.defineCommand('recPut', { numberOfKeys: 1, lua: PUT });
    redis.defineCommand('recClaim', { numberOfKeys: 1, lua: CLAIM });
    redis.defineCommand('recRemove', { numberOfKeys: 1, lua: REMOVE });
    redis.defineCommand('recReap', { numberOfKeys: 1, lua: REAP });
    this.redis = redis as Scripted;
  }

  async get(keyHash: string): Promise<SessionRecord | undefined> {
    const v = await this.redis.get(REC + keyHash);
    return v ? (JSON.parse(v) as SessionRecord) : undefined;
  }

  async put(keyHash: string, r: SessionRecord, deadlineMs?: number): Promise<boolean> {
    const ok = await this.redis.recPut(REC + keyHash, r.owner, JSON.stringify(r), this.ttlMs, keyHash, deadlineMs ?? '');
    return ok === 1;
  }

  async claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SessionRecord): Promise<boolean> {
    return (await this.redis.recClaim(REC + keyHash, expect.owner, expect.state, JSON.stringify(next), this.ttlMs, keyHash)) === 1;
  }

  async remove(keyHash: string, owner: string): Promise<void> {
    await this.redis.recRemove(REC + keyHash, owner, keyHash);
  }

  async reap(now: number): Promise<SessionRecord[]> {
    const due = await this.redis.zrangebyscore(DEADLINES, '-inf', now, 'LIMIT', 0, REAP_BATCH);
    const out: SessionRecord[] = [];
    for (const keyHash of due) {
      const v = await this.redis.recReap(REC + keyHash, keyHash);
      if (v) out.push(JSON.parse(v) as SessionRecord);
    }
    return out;
  }
}

/** One replica: the same rules in a Map (tests, and a gateway without REDIS_URL). */
class MemoryRecordStore implements RecordStore {
  readonly shared = false;
  private readonly records = new Map<string, { value: string; expires: number; deadline?: number }>();

  constructor(private readonly ttlMs: number, private readonly now: () => number) {}

  private current(keyHash: string): SessionRecord | undefined {
    const e = this.records.get(keyHash);
    if (e && e.expires <= this.now()) this.records.delete(keyHash);
    return e && e.expires > this.now() ? (JSON.parse(e.value) as SessionRecord) : undefined;
  }

  async get(keyHash: string): Promise<SessionRecord | undefined> {
    return this.current(keyHash);
  }

  async put(keyHash: string, r: SessionRecord, deadlineMs?: number): Promise<boolean> {
    const cur = this.current(keyHash);
    if (cur && cur.owner !== r.owner) return false;
    this.records.set(keyHash, { value: JSON.stringify(r), expires: this.now() + this.ttlMs, deadline: deadlineMs });
    return true;
  }

  async claim(keyHash: string, expect: { owner: string; state: RecordState }, next: SessionRecord): Promise<boolean> {
    const cur = this.current(keyHash);
    if (!cur || cur.owner !== expect.owner || cur.state !== expect.state) return false;
    this.records.set(keyHash, { value: JSON.stringify(next), expires: this.now() + this.ttlMs });
    return true;
  }

  async remove(keyHash: string, owner: string): Promise<void> {
    if (this.current(keyHash)?.owner === owner) this.records.delete(keyHash);
  }

  async reap(now: number): Promise<SessionRecord[]> {
    const out: SessionRecord[] = [];
    for (const [keyHash, e] of this.records) {
      if (e.deadline === undefined || e.deadline > now) continue;
      this.records.delete(keyHash);
      const r = JSON.parse(e.value) as SessionRecord;
      if (r.state === 'handed_over') out.push(r);
    }
    return out;
  }
}

/** Records live RESUME_GRACE_SECONDS + 30 s past their last write. */
export function createRecordStore(o: { redis?: Redis; graceSeconds: number; now?: () => number }): RecordStore {
  const ttlMs = Math.round((o.graceSeconds + 30) * 1000);
  return o.redis ? new RedisRecordStore(o.redis, ttlMs) : new MemoryRecordStore(ttlMs, o.now ?? Date.now);
}
