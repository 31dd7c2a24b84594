// The usage store in Redis: each event settled in two single-slot steps (lua.ts: the session's, then
// its tenant's; atomic and idempotent each), queries read buckets through a per-tenant index of
// non-empty buckets and sessions through a per-tenant sorted set keyed by start time. The same with
// one Redis, Sentinel or a Redis Cluster: no script or multi-key command leaves one slot (keys.ts), and
// reads of keys in different slots go out as separate commands, in parallel.
import { Cluster, Redis, ReplyError } from 'ioredis';
import { newRedis, type RedisClient, type RedisSettings } from '../redis/index.js';
import { logger } from '../telemetry/index.js';
import type { Endpoint } from '../protocol/index.js';
import { DAY_MS, HOUR_MS, bucketStart, registryKeys, sessionKey, tenantKeys } from './keys.js';
import * as lua from './lua.js';
import {
  MAX_GAPS,
  StoreUnavailable,
  addBucket,
  coverageOf,
  emptyBucket,
  isGapMs,
  refusedByStore,
  sessionFigures,
  storable,
  type BucketRow,
  type CoverageMs,
  type CreditTotal,
  type GapMs,
  type SegmentRow,
  type Granularity,
  type LedgerEvent,
  type Outcome,
  type SessionCursor,
  type SessionPage,
  type SessionRow,
  type UsageStore,
} from './model.js';

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;
interface Scripts {
  usageStart: ScriptFn;
  usageUpstream: ScriptFn;
  usageUsage: ScriptFn;
  usageEnd: ScriptFn;
  usageRefused: ScriptFn;
  usageRevert: ScriptFn;
  usageSettle: ScriptFn;
  usageRegister: ScriptFn;
  usageMigrateKey: ScriptFn;
  usageMigrateCredits: ScriptFn;
  usageMigrateRegistry: ScriptFn;
  leaseAcquire: ScriptFn;
  leaseRenew: ScriptFn;
}
export type ScriptedRedis = RedisClient & Scripts;

const SCRIPTS: Array<[keyof Scripts, number, string]> = [
  ['usageStart', 1, lua.START],
  ['usageUpstream', 1, lua.UPSTREAM],
  ['usageUsage', 1, lua.USAGE],
  ['usageEnd', 1, lua.END],
  ['usageRefused', 1, lua.REFUSED],
  ['usageRevert', 1, lua.REVERT],
  ['usageSettle', 7, lua.SETTLE],
  ['usageRegister', 2, lua.REGISTER],
  ['usageMigrateKey', 2, lua.MIGRATE_KEY],
  ['usageMigrateCredits', 2, lua.MIGRATE_CREDITS],
  ['usageMigrateRegistry', 4, lua.MIGRATE_REGISTRY],
  ['leaseAcquire', 1, lua.LEASE_ACQUIRE],
  ['leaseRenew', 1, lua.LEASE_RENEW],
];

/** ioredis client that fails fast instead of queueing in memory while Redis is away (newRedis). */
export function createRedisClient(settings: RedisSettings): ScriptedRedis {
  const redis = newRedis({ Redis, Cluster }, settings);
  for (const [name, numberOfKeys, script] of SCRIPTS) redis.defineCommand(name, { numberOfKeys, lua: script });
  return redis as ScriptedRedis;
}

// Replies that mean "not now" rather than "this event is wrong". MOVED and ASK reach the caller when
// a Cluster's slot moved and the client's pipeline to the old owner held other commands that succeeded:
// the command did not run, and runs once the client has the new slot map.
const TRANSIENT = /^(LOADING|BUSY|READONLY|OOM|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|NOREPLICAS|MISCONF|MOVED|ASK)\b/;
/** True when an error means Redis cannot take writes now (retry later), not a bad command. */
export function isOutage(err: unknown): boolean {
  return !(err instanceof ReplyError) || TRANSIENT.test((err as Error).message);
}

/** A session step's answer (lua.ts stateReply). */
interface SessionState {
  status: number;
  ver: number;
  target: number;
  media: number;
  tenant: string;
  endpoint: string;
  start: number;
  base: [string, string, string];
  speech: number;
  covered: number;
}

function stateOf(reply: unknown): SessionState {
  const r = reply as [number, ...string[]];
  return {
    status: Number(r[0]),
    ver: Number(r[1]),
    target: Number(r[2]),
    media: Number(r[3]),
    tenant: r[4],
    endpoint: r[5],
    start: Number(r[6]),
    base: [r[7], r[8], r[9]],
    speech: Number(r[10] ?? 0),
    covered: Number(r[11] ?? 0),
  };
}

/** Reads of many keys in different slots: in parallel, at most this many at once. */
const READ_PARALLEL = 64;

export class RedisUsageStore implements UsageStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly prefix: string,
    private readonly retentionMs: number,
    private readonly now: () => number,
  ) {}

  /**
   * Each session's events in order, the sessions side by side. An event is done when its session step
   * and its tenant step both ran; if either met an outage, the whole batch goes to the journal, whose
   * replay finds the session steps done (0) and re-runs the tenant steps.
   */
  async apply(events: LedgerEvent[]): Promise<void> {
    if (this.redis.status !== 'ready') throw new StoreUnavailable(`redis ${this.redis.status}`);
    const bySession = new Map<string, LedgerEvent[]>();
    for (const e of events) {
      const list = bySession.get(e.k);
      if (list) list.push(e);
      else bySession.set(e.k, [e]);
    }
    const reg = registryKeys(this.prefix);
    const tenants = new Set(events.flatMap((e) => (e.t === 'start' ? [e.tenant] : [])));
    const registered = [...tenants].map((t) => this.redis.usageRegister(reg.tenants, reg.order, t));
    const runs = await Promise.allSettled([
      ...registered,
      ...[...bySession.values()].map(async (list) => {
        for (const e of list) await this.applyOne(e);
      }),
    ]);
    for (const r of runs) {
      if (r.status === 'fulfilled') continue;
      const err = r.reason as Error;
      throw err instanceof StoreUnavailable ? err : new StoreUnavailable(err.message);
    }
  }

  private async applyOne(e: LedgerEvent): Promise<void> {
    try {
      const st = stateOf(await this.sessionStep(e));
      if (st.status === -1) refusedByStore(e);
      if (e.t === 'upstream' || e.t === 'refused' || st.tenant === '') return;
      if ((await this.settle(e.k, st)) !== -1) return;
      // The tenant's totals cannot take it: the event is taken back and what is left is settled.
      if (st.status !== -1) refusedByStore(e);
      const back = stateOf(await this.redis.usageRevert(sessionKey(this.prefix, e.k), ...this.clock(), st.ver));
      if (back.tenant !== '' && (await this.settle(e.k, back)) === -1)
        logger.error({ sessionKey: e.k }, 'usage settlement refused after taking the event back');
    } catch (err) {
      if (isOutage(err)) throw new StoreUnavailable((err as Error).message);
      // A script refusing an event is a bug, not an outage: journaling it would replay it forever.
      logger.error({ err: (err as Error).message, event: e }, 'usage event rejected by redis; dropped');
    }
  }

  private clock(): [number, number] {
    return [this.now(), this.retentionMs];
  }

  private sessionStep(e: LedgerEvent): Promise<unknown> {
    const sk = sessionKey(this.prefix, e.k);
    const r = this.redis;
    const base = this.clock();
    if (e.t === 'start') return r.usageStart(sk, ...base, e.k, e.tenant, e.endpoint, e.at, e.iid ?? '', e.env ?? '');
    if (e.t === 'upstream') return r.usageUpstream(sk, ...base, e.seg ?? 0, e.usid);
    if (e.t === 'usage') return r.usageUsage(sk, ...base, e.seg ?? 0, e.seq, e.kind, e.micro);
    if (e.t === 'end') return r.usageEnd(sk, ...base, e.outcome, e.mediaMs, e.at, ...coverageArgs(coverageOf(e)));
    return r.usageRefused(sk, ...base);
  }

  private async settle(key: string, st: SessionState): Promise<number> {
    const t = tenantKeys(this.prefix, st.tenant);
    const [h, d] = [bucketStart(st.start, HOUR_MS), bucketStart(st.start, DAY_MS)];
    const keys = [
      t.bucket(st.endpoint, 'h', h),
      t.bucket(st.endpoint, 'd', d),
      t.index(st.endpoint, 'h'),
      t.index(st.endpoint, 'd'),
      t.credits,
      t.settled(d),
      t.sessions,
    ];
    const args = [st.ver, st.target, st.media, ...st.base, st.start, h, d, st.speech, st.covered];
    return Number(await this.redis.usageSettle(...keys, ...this.clock(), key, ...args));
  }

  async buckets(q: {
    tenant: string;
    endpoints: readonly Endpoint[];
    granularity: Granularity;
    from: number;
    to: number;
  }): Promise<BucketRow[]> {
    const g = q.granularity === 'hour' ? 'h' : 'd';
    const merged = new Map<number, BucketRow>();
    for (const endpoint of q.endpoints) {
      const t = tenantKeys(this.prefix, q.tenant);
      const starts = await this.read(() => this.redis.zrangebyscore(t.index(endpoint, g), q.from, `(${q.to}`));
      if (starts.length === 0) continue;
      // One tenant's buckets share its slot: one pipeline, even on a Cluster.
      const p = this.redis.pipeline();
      for (const s of starts)
        p.hmget(t.bucket(endpoint, g, Number(s)), 'micro', 'sessions', 'mediaMs', 'speechMs', 'coveredMs');
      const res = await this.read(() => p.exec());
      starts.forEach((s, i) => {
        const [err, v] = res?.[i] ?? [null, null];
        if (err) throw new StoreUnavailable(err.message);
        const [micro, sessions, mediaMs] = (v as (string | null)[]).map((x) => Number(x ?? 0));
        if (micro === 0 && sessions === 0 && mediaMs === 0) return; // expired or empty
        const start = Number(s);
        const row = merged.get(start) ?? emptyBucket(start);
        addBucket(row, { start, micro, sessions, mediaMs, ...speechOf(v as (string | null)[]) });
        merged.set(start, row);
      });
    }
    return [...merged.values()].sort((a, b) => a.start - b.start);
  }

  async sessions(q: {
    tenant: string;
    from: number;
    to: number;
    after: SessionCursor | null;
    limit: number;
  }): Promise<SessionPage> {
    const tz = tenantKeys(this.prefix, q.tenant).sessions;
    const min = q.after ? Math.max(q.from, q.after.start) : q.from;
    const keys: { key: string; start: number }[] = [];
    const chunk = 200;
    // Members sharing the cursor's start sort by key; skip those up to and including the cursor.
    for (let offset = 0; keys.length <= q.limit; offset += chunk) {
      const got = await this.read(() =>
        this.redis.zrangebyscore(tz, min, `(${q.to}`, 'WITHSCORES', 'LIMIT', offset, chunk),
      );
      for (let i = 0; i < got.length; i += 2) {
        const key = got[i];
        const score = Number(got[i + 1]);
        if (q.after && score === q.after.start && key <= q.after.key) continue;
        keys.push({ key, start: score });
      }
      if (got.length < chunk * 2) break;
    }
    const page = keys.slice(0, q.limit);
    // Session hashes lie in slots of their own: one command each, in parallel.
    const hashes = await this.read(() =>
      inParallel(page, (k) => this.redis.hgetall(sessionKey(this.prefix, k.key)), READ_PARALLEL),
    );
    const rows: SessionRow[] = [];
    for (const h of hashes) {
      const row = rowFromHash(h);
      if (row) rows.push(row);
    }
    const last = page[page.length - 1];
    const next = keys.length > q.limit && last ? { start: last.start, key: last.key } : null;
    return { rows, next };
  }

  async tenants(): Promise<string[]> {
    return (await this.read(() => this.redis.smembers(registryKeys(this.prefix).tenants))).sort();
  }

  async creditTotals(): Promise<CreditTotal[]> {
    const reg = registryKeys(this.prefix);
    const res = await this.read(() => this.redis.multi().zrange(reg.order, 0, -1).smembers(reg.tenants).exec());
    const [[e1, order], [e2, all]] = (res ?? []) as [Error | null, unknown][];
    if (e1 || e2 || !res) throw new StoreUnavailable((e1 ?? e2)?.message ?? 'credit totals not read');
    // Tenants of the ledger from before the order existed have no rank: they follow.
    const ranked = new Set(order as string[]);
    const tenants = [...ranked, ...(all as string[]).filter((t) => !ranked.has(t)).sort()];
    // Each tenant's total lies in its tenant's slot.
    const totals = await this.read(() =>
      inParallel(tenants, (t) => this.redis.get(tenantKeys(this.prefix, t).credits), READ_PARALLEL),
    );
    return tenants.map((tenant, i) => ({ tenant, micro: Number(totals[i] ?? 0) }));
  }

  private async read<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw new StoreUnavailable((err as Error).message);
    }
  }
}

/** f over items, at most `limit` at a time, the results in order. */
async function inParallel<T, R>(items: readonly T[], f: (item: T) => Promise<R>, limit: number): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The segments a session hash holds, in order (field names as in lua.ts). */
function segmentsFromHash(h: Record<string, string>): SegmentRow[] {
  const out: SegmentRow[] = [];
  for (let seg = 0; seg < Number(h.nseg ?? 1); seg++) {
    const f = (name: string): string | undefined => h[seg === 0 ? name : `${name}:${seg}`];
    const [usid, final, dsum] = [f('usid'), f('final'), f('dsum')];
    if (usid === undefined && final === undefined && dsum === undefined) continue; // never used
    out.push({ upstreamSessionId: usid ?? null, micro: Number(final ?? dsum ?? 0), estimated: final === undefined });
  }
  return out;
}

function rowFromHash(h: Record<string, string>): SessionRow | null {
  if (!h.sessionKey || h.start === undefined) return null; // expired between index and read
  return {
    sessionKey: h.sessionKey,
    tenant: h.tenant,
    endpoint: h.endpoint as Endpoint,
    interactionId: h.iid ?? null,
    environment: h.env ?? null,
    start: Number(h.start),
    end: h.end !== undefined ? Number(h.end) : null,
    outcome: (h.outcome as Outcome | undefined) ?? null,
    mediaMs: h.mediaMs !== undefined ? Number(h.mediaMs) : null,
    ...coverageFromHash(h),
    ...sessionFigures(segmentsFromHash(h), h.refused === '1'),
  };
}

/** END's coverage arguments (lua.ts), or none. */
function coverageArgs(c: CoverageMs | null): (string | number)[] {
  return c ? [c.speechMs, c.coveredMs, c.gaps.flat().join(','), c.moreGaps] : [];
}

/** A stored integer figure (lua.ts writes them; Redis is input all the same), or null: absent, not
 * an integer, or past 2^53. */
function figure(v: string | null | undefined): number | null {
  if (v === null || v === undefined || !/^\d{1,16}$/.test(v)) return null;
  const n = Number(v);
  return storable(n) ? n : null;
}

/** A bucket's speech and covered milliseconds; both 0 when either is out of range or covered passes speech. */
function speechOf(v: (string | null)[]): Pick<BucketRow, 'speechMs' | 'coveredMs'> {
  const [speechMs, coveredMs] = [figure(v[3] ?? '0'), figure(v[4] ?? '0')];
  if (speechMs === null || coveredMs === null || coveredMs > speechMs) return { speechMs: 0, coveredMs: 0 };
  return { speechMs, coveredMs };
}

/** A session hash's coverage: speech and covered together or neither, the gaps as a whole or none. */
function coverageFromHash(h: Record<string, string>): Pick<SessionRow, 'speechMs' | 'coveredMs' | 'gaps' | 'moreGaps'> {
  const [speechMs, coveredMs] = [figure(h.speechMs), figure(h.coveredMs)];
  if (speechMs === null || coveredMs === null || coveredMs > speechMs)
    return { speechMs: null, coveredMs: null, gaps: [], moreGaps: 0 };
  return { speechMs, coveredMs, gaps: gapsFromHash(h.gaps), moreGaps: figure(h.moreGaps ?? '0') ?? 0 };
}

function gapsFromHash(flat: string | undefined): GapMs[] {
  const parts = flat ? flat.split(',', MAX_GAPS * 3 + 1).map(figure) : [];
  if (parts.length % 3 !== 0 || parts.length > MAX_GAPS * 3) return [];
  const gaps: GapMs[] = [];
  for (let i = 0; i < parts.length; i += 3) {
    const g = parts.slice(i, i + 3);
    if (!isGapMs(g)) return [];
    gaps.push(g);
  }
  return gaps;
}
