// The usage store in Redis: events applied through the Lua scripts in lua.ts (atomic,
// idempotent), queries read buckets through a per-tenant index of non-empty buckets and sessions
// through a per-tenant sorted set keyed by start time.
import { Redis, ReplyError, type ChainableCommander } from 'ioredis';
import { newRedis, type RedisSettings } from '../redis/index.js';
import { logger } from '../telemetry/index.js';
import type { Endpoint } from '../protocol/index.js';
import * as lua from './lua.js';
import {
  StoreUnavailable,
  refusedByStore,
  sessionFigures,
  type BucketRow,
  type CreditTotal,
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
  leaseAcquire: ScriptFn;
  leaseRenew: ScriptFn;
}
export type ScriptedRedis = Redis & Scripts;
type ScriptedPipeline = ChainableCommander & {
  [K in keyof Scripts]: (...args: (string | number)[]) => ScriptedPipeline;
};

/** ioredis client that fails fast instead of queueing in memory while Redis is away (newRedis). */
export function createRedisClient(settings: RedisSettings): ScriptedRedis {
  const redis = newRedis(Redis, settings);
  redis.defineCommand('usageStart', { numberOfKeys: 1, lua: lua.START });
  redis.defineCommand('usageUpstream', { numberOfKeys: 1, lua: lua.UPSTREAM });
  redis.defineCommand('usageUsage', { numberOfKeys: 1, lua: lua.USAGE });
  redis.defineCommand('usageEnd', { numberOfKeys: 1, lua: lua.END });
  redis.defineCommand('usageRefused', { numberOfKeys: 1, lua: lua.REFUSED });
  redis.defineCommand('leaseAcquire', { numberOfKeys: 1, lua: lua.LEASE_ACQUIRE });
  redis.defineCommand('leaseRenew', { numberOfKeys: 1, lua: lua.LEASE_RENEW });
  return redis as ScriptedRedis;
}

// Replies that mean "not now" rather than "this event is wrong".
const TRANSIENT = /^(LOADING|BUSY|READONLY|OOM|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|NOREPLICAS|MISCONF)/;
/** True when an error means Redis cannot take writes now (retry later), not a bad command. */
export function isOutage(err: unknown): boolean {
  return !(err instanceof ReplyError) || TRANSIENT.test((err as Error).message);
}

export class RedisUsageStore implements UsageStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly prefix: string,
    private readonly retentionMs: number,
    private readonly now: () => number,
  ) {}

  private sessionKey(k: string): string {
    return `${this.prefix}s:${k}`;
  }

  async apply(events: LedgerEvent[]): Promise<void> {
    if (this.redis.status !== 'ready') throw new StoreUnavailable(`redis ${this.redis.status}`);
    const p = this.redis.pipeline() as ScriptedPipeline;
    const base = [this.prefix, this.now(), this.retentionMs];
    for (const e of events) {
      const sk = this.sessionKey(e.k);
      if (e.t === 'start') p.usageStart(sk, ...base, e.k, e.tenant, e.endpoint, e.at, e.iid ?? '', e.env ?? '');
      else if (e.t === 'upstream') p.usageUpstream(sk, ...base, e.seg ?? 0, e.usid);
      else if (e.t === 'usage') p.usageUsage(sk, ...base, e.seg ?? 0, e.seq, e.kind, e.micro);
      else if (e.t === 'end') p.usageEnd(sk, ...base, e.outcome, e.mediaMs, e.at);
      else p.usageRefused(sk, ...base);
    }
    let results: [Error | null, unknown][] | null;
    try {
      results = await p.exec();
    } catch (err) {
      throw new StoreUnavailable((err as Error).message);
    }
    (results ?? []).forEach(([err, result], i) => {
      if (result === -1) return refusedByStore(events[i]);
      if (!err) return;
      if (isOutage(err)) throw new StoreUnavailable(err.message);
      // A script refusing an event is a bug, not an outage: journaling it would replay it forever.
      logger.error({ err: err.message, event: events[i] }, 'usage event rejected by redis; dropped');
    });
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
      const starts = await this.read(() =>
        this.redis.zrangebyscore(`${this.prefix}bi:${q.tenant}:${endpoint}:${g}`, q.from, `(${q.to}`),
      );
      if (starts.length === 0) continue;
      const p = this.redis.pipeline();
      for (const s of starts)
        p.hmget(`${this.prefix}b:${q.tenant}:${endpoint}:${g}:${s}`, 'micro', 'sessions', 'mediaMs');
      const res = await this.read(() => p.exec());
      starts.forEach((s, i) => {
        const [err, v] = res?.[i] ?? [null, null];
        if (err) throw new StoreUnavailable(err.message);
        const [micro, sessions, mediaMs] = (v as (string | null)[]).map((x) => Number(x ?? 0));
        if (micro === 0 && sessions === 0 && mediaMs === 0) return; // expired or empty
        const start = Number(s);
        const row = merged.get(start) ?? { start, micro: 0, sessions: 0, mediaMs: 0 };
        row.micro += micro;
        row.sessions += sessions;
        row.mediaMs += mediaMs;
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
    const tz = `${this.prefix}ts:${q.tenant}`;
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
    const p = this.redis.pipeline();
    for (const k of page) p.hgetall(this.sessionKey(k.key));
    const res = page.length ? await this.read(() => p.exec()) : [];
    const rows: SessionRow[] = [];
    for (const [err, h] of res ?? []) {
      if (err) throw new StoreUnavailable(err.message);
      const row = rowFromHash(h as Record<string, string>);
      if (row) rows.push(row);
    }
    const last = page[page.length - 1];
    const next = keys.length > q.limit && last ? { start: last.start, key: last.key } : null;
    return { rows, next };
  }

  async tenants(): Promise<string[]> {
    return (await this.read(() => this.redis.smembers(`${this.prefix}tenants`))).sort();
  }

  async creditTotals(): Promise<CreditTotal[]> {
    const res = await this.read(() =>
      this.redis.multi().zrange(`${this.prefix}torder`, 0, -1).hgetall(`${this.prefix}credits`).exec(),
    );
    const [[e1, order], [e2, totals]] = (res ?? []) as [Error | null, unknown][];
    if (e1 || e2 || !res) throw new StoreUnavailable((e1 ?? e2)?.message ?? 'credit totals not read');
    const micro = totals as Record<string, string>;
    // Tenants of the ledger from before the totals existed have no 'torder' rank: they follow.
    const ranked = new Set(order as string[]);
    const tenants = [
      ...ranked,
      ...Object.keys(micro)
        .filter((t) => !ranked.has(t))
        .sort(),
    ];
    return tenants.map((tenant) => ({ tenant, micro: Number(micro[tenant] ?? 0) }));
  }

  private async read<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw new StoreUnavailable((err as Error).message);
    }
  }
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
    ...sessionFigures(segmentsFromHash(h), h.refused === '1'),
  };
}
