// The usage store without Redis: the same semantics as the Lua scripts in lua.ts, in process
// memory (single replica, lost on restart). Kept line-for-line parallel to those scripts,
// including their checks: every total stays an integer in 0..MAX_TOTAL, an event is applied whole
// or not at all, and a figure that does not fit only marks the session refused (estimated).
import type { Endpoint } from '../protocol/index.js';
import { logger } from '../telemetry/index.js';
import {
  DAY_MS,
  HOUR_MS,
  MAX_MICRO_PER_MESSAGE,
  MAX_TOTAL,
  addBucket,
  coverageOf,
  emptyBucket,
  refusedByStore,
  segmentOf,
  sessionFigures,
  storable,
  type BucketRow,
  type CoverageMs,
  type CreditTotal,
  type Granularity,
  type LedgerEvent,
  type Outcome,
  type SessionCursor,
  type SessionPage,
  type SessionRow,
  type UsageStore,
} from './model.js';

interface Segment {
  usid?: string;
  dsum: number;
  final?: number;
}

interface Session {
  sessionKey: string;
  tenant?: string;
  endpoint?: Endpoint;
  start?: number;
  iid?: string;
  env?: string;
  started: boolean;
  ended: boolean;
  seqs: Set<number>;
  segs: Map<number, Segment>;
  counted: number;
  end?: number;
  outcome?: Outcome;
  mediaMs?: number;
  /** counted in the buckets with the media */
  coverage?: CoverageMs;
  mediaCounted: boolean;
  refused: boolean;
}

/** What applying one event did: applied (or a replay), refused (figures out of range), or invalid (malformed). */
type Applied = 'ok' | 'refused' | 'invalid';

const GRAINS: [Granularity, number][] = [
  ['hour', HOUR_MS],
  ['day', DAY_MS],
];

export class MemoryUsageStore implements UsageStore {
  private readonly sessionsByKey = new Map<string, Session>();
  private readonly buckets_ = new Map<string, Map<number, BucketRow>>(); // tenant\0endpoint\0granularity → start → row
  private readonly tenantSet = new Set<string>();
  /** Cumulative credits per tenant, in first-start order: as 'credits' and 'torder' in lua.ts. */
  private readonly totals = new Map<string, number>();
  private lastPrune = 0;

  constructor(
    private readonly retentionMs: number,
    private readonly now: () => number,
  ) {}

  async apply(events: LedgerEvent[]): Promise<void> {
    for (const e of events) {
      const result = this.applyOne(e);
      if (result === 'refused') {
        this.session(e.k).refused = true;
        refusedByStore(e);
      } else if (result === 'invalid') {
        logger.error({ event: e }, 'usage event malformed; dropped');
      }
    }
    this.prune();
  }

  private session(k: string): Session {
    let s = this.sessionsByKey.get(k);
    if (!s) {
      s = {
        sessionKey: k,
        started: false,
        ended: false,
        seqs: new Set(),
        segs: new Map(),
        counted: 0,
        mediaCounted: false,
        refused: false,
      };
      this.sessionsByKey.set(k, s);
    }
    return s;
  }

  private applyOne(e: LedgerEvent): Applied {
    const s = this.session(e.k);
    if (e.t === 'start') {
      if (s.started) return 'ok';
      if (!e.k || !e.tenant || !e.endpoint || !storable(e.at)) return 'invalid';
      if (!this.fits(s, { st: { tenant: e.tenant, endpoint: e.endpoint, start: e.at } })) return 'refused';
      Object.assign(s, { started: true, tenant: e.tenant, endpoint: e.endpoint, start: e.at, iid: e.iid, env: e.env });
      this.tenantSet.add(e.tenant);
      if (!this.totals.has(e.tenant)) this.totals.set(e.tenant, 0);
      this.bump(s, 'sessions', 1);
    } else if (e.t === 'upstream') {
      const i = segmentOf(e);
      if (i === null) return 'invalid';
      segment(s, i).usid = e.usid;
    } else if (e.t === 'usage') {
      return this.usage(s, e);
    } else if (e.t === 'end') {
      if (s.ended) return 'ok';
      if (!e.outcome || !storable(e.mediaMs) || !storable(e.at)) return 'invalid';
      // Coverage out of range is none: the end still counts (as END in lua.ts).
      const coverage = coverageOf(e) ?? undefined;
      if (!this.fits(s, { media: e.mediaMs, coverage })) return 'refused';
      Object.assign(s, { ended: true, outcome: e.outcome, mediaMs: e.mediaMs, end: e.at, coverage });
    } else {
      s.refused = true; // a figure the ledger refused: the session is estimated
      return 'ok';
    }
    this.reconcile(s);
    return 'ok';
  }

  private usage(s: Session, e: Extract<LedgerEvent, { t: 'usage' }>): Applied {
    const i = segmentOf(e);
    if (i === null || !Number.isSafeInteger(e.seq) || (e.kind !== 'delta' && e.kind !== 'final')) return 'invalid';
    if (s.seqs.has(e.seq)) return 'ok';
    if (!storable(e.micro, MAX_MICRO_PER_MESSAGE)) return 'refused';
    const old = s.segs.get(i);
    const dsum = (old?.dsum ?? 0) + (e.kind === 'delta' ? e.micro : 0);
    const value = e.kind === 'final' ? e.micro : (old?.final ?? dsum);
    if (dsum > MAX_TOTAL || !this.fits(s, { seg: i, value })) return 'refused';
    s.seqs.add(e.seq);
    const seg = segment(s, i);
    if (e.kind === 'final') seg.final = e.micro;
    else seg.dsum = dsum;
    this.reconcile(s);
    return 'ok';
  }

  /**
   * Would every total stay in 0..MAX_TOTAL once reconciled, with segment `seg` at `value`, the
   * session's media at `media`, and (a start) `st`? As fits() in lua.ts.
   */
  private fits(
    s: Session,
    o: {
      seg?: number;
      value?: number;
      media?: number;
      coverage?: CoverageMs;
      st?: { tenant: string; endpoint: Endpoint; start: number };
    },
  ): boolean {
    const target = credits(s, o.seg, o.value);
    if (target > MAX_TOTAL) return false;
    const [tenant, endpoint, start, dSessions] = o.st
      ? [o.st.tenant, o.st.endpoint, o.st.start, 1]
      : [s.tenant, s.endpoint, s.start, 0];
    if (tenant === undefined || endpoint === undefined || start === undefined) return true; // no buckets yet
    const total = (this.totals.get(tenant) ?? 0) + target - s.counted;
    if (total < 0 || total > MAX_TOTAL) return false;
    const dMedia = s.mediaCounted ? 0 : (o.media ?? s.mediaMs ?? 0);
    const cov = s.mediaCounted ? undefined : (o.coverage ?? s.coverage);
    for (const [g, ms] of GRAINS) {
      const row = this.buckets_.get(`${tenant}\0${endpoint}\0${g}`)?.get(start - (start % ms));
      const after = [
        (row?.micro ?? 0) + target - s.counted,
        (row?.mediaMs ?? 0) + dMedia,
        (row?.sessions ?? 0) + dSessions,
        (row?.speechMs ?? 0) + (cov?.speechMs ?? 0),
        (row?.coveredMs ?? 0) + (cov?.coveredMs ?? 0),
      ];
      if (after.some((n) => n < 0 || n > MAX_TOTAL)) return false;
    }
    return true;
  }

  private reconcile(s: Session): void {
    if (s.tenant === undefined || s.start === undefined) return;
    const target = credits(s);
    if (target !== s.counted) {
      this.bump(s, 'micro', target - s.counted);
      this.totals.set(s.tenant, (this.totals.get(s.tenant) ?? 0) + target - s.counted);
      s.counted = target;
    }
    if (s.mediaMs !== undefined && !s.mediaCounted) {
      this.bump(s, 'mediaMs', s.mediaMs);
      this.bump(s, 'speechMs', s.coverage?.speechMs ?? 0);
      this.bump(s, 'coveredMs', s.coverage?.coveredMs ?? 0);
      s.mediaCounted = true;
    }
  }

  private bump(s: Session, field: Exclude<keyof BucketRow, 'start'>, delta: number): void {
    if (s.tenant === undefined || s.endpoint === undefined || s.start === undefined) return;
    for (const [g, ms] of GRAINS) {
      const start = s.start - (s.start % ms);
      const id = `${s.tenant}\0${s.endpoint}\0${g}`;
      let m = this.buckets_.get(id);
      if (!m) this.buckets_.set(id, (m = new Map()));
      const row = m.get(start) ?? emptyBucket(start);
      row[field] += delta;
      m.set(start, row);
    }
  }

  /** Drops what Redis would have expired; at most once an hour of the ledger's clock. */
  private prune(): void {
    const now = this.now();
    if (now - this.lastPrune < HOUR_MS) return;
    this.lastPrune = now;
    const cutoff = now - this.retentionMs;
    for (const m of this.buckets_.values()) for (const start of m.keys()) if (start < cutoff) m.delete(start);
    for (const [k, s] of this.sessionsByKey)
      if (s.start !== undefined && s.start < cutoff) this.sessionsByKey.delete(k);
  }

  async buckets(q: {
    tenant: string;
    endpoints: readonly Endpoint[];
    granularity: Granularity;
    from: number;
    to: number;
  }): Promise<BucketRow[]> {
    const cutoff = this.now() - this.retentionMs;
    const merged = new Map<number, BucketRow>();
    for (const endpoint of q.endpoints) {
      for (const row of this.buckets_.get(`${q.tenant}\0${endpoint}\0${q.granularity}`)?.values() ?? []) {
        if (row.start < q.from || row.start >= q.to || row.start < cutoff) continue;
        if (row.micro === 0 && row.sessions === 0 && row.mediaMs === 0) continue;
        const m = merged.get(row.start) ?? emptyBucket(row.start);
        addBucket(m, row);
        merged.set(row.start, m);
      }
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
    const cutoff = this.now() - this.retentionMs;
    const all = [...this.sessionsByKey.values()]
      .filter((s) => s.started && s.tenant === q.tenant && s.start! >= q.from && s.start! < q.to && s.start! >= cutoff)
      .filter((s) => !q.after || s.start! > q.after.start || (s.start === q.after.start && s.sessionKey > q.after.key))
      .sort((a, b) => a.start! - b.start! || (a.sessionKey < b.sessionKey ? -1 : a.sessionKey > b.sessionKey ? 1 : 0));
    const page = all.slice(0, q.limit);
    const last = page[page.length - 1];
    return {
      rows: page.map(toRow),
      next: all.length > q.limit && last ? { start: last.start!, key: last.sessionKey } : null,
    };
  }

  async tenants(): Promise<string[]> {
    return [...this.tenantSet].sort();
  }

  async creditTotals(): Promise<CreditTotal[]> {
    return [...this.totals].map(([tenant, micro]) => ({ tenant, micro }));
  }
}

/** Segment i of the session (a valid index), created on first use. */
function segment(s: Session, i: number): Segment {
  let seg = s.segs.get(i);
  if (!seg) s.segs.set(i, (seg = { dsum: 0 }));
  return seg;
}

/** Σ over segments of (final ?? sum of deltas); segment `oseg` counts `oval` instead when given. */
function credits(s: Session, oseg?: number, oval?: number): number {
  let sum = oseg !== undefined && !s.segs.has(oseg) ? (oval ?? 0) : 0;
  for (const [i, seg] of s.segs) sum += i === oseg ? (oval ?? 0) : (seg.final ?? seg.dsum);
  return sum;
}

function toRow(s: Session): SessionRow {
  const segments = [...s.segs.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, seg]) => ({
      upstreamSessionId: seg.usid ?? null,
      micro: seg.final ?? seg.dsum,
      estimated: seg.final === undefined,
    }));
  return {
    sessionKey: s.sessionKey,
    tenant: s.tenant!,
    endpoint: s.endpoint!,
    interactionId: s.iid ?? null,
    environment: s.env ?? null,
    start: s.start!,
    end: s.end ?? null,
    outcome: s.outcome ?? null,
    mediaMs: s.mediaMs ?? null,
    speechMs: s.coverage?.speechMs ?? null,
    coveredMs: s.coverage?.coveredMs ?? null,
    gaps: s.coverage?.gaps ?? [],
    moreGaps: s.coverage?.moreGaps ?? 0,
    ...sessionFigures(segments, s.refused),
  };
}
