// The usage store without Redis: the same semantics as the Lua scripts in lua.ts, in process
// memory (single replica, lost on restart). Kept line-for-line parallel to those scripts.
import type { Endpoint } from '../protocol/endpoint.js';
import {
  DAY_MS, HOUR_MS, segmentOf, sessionFigures, type BucketRow, type Granularity, type LedgerEvent, type Outcome,
  type SessionCursor, type SessionPage, type SessionRow, type UsageStore,
} from './model.js';

interface Segment { usid?: string; dsum: number; final?: number }

interface Session {
  sessionKey: string; tenant?: string; endpoint?: Endpoint; start?: number; iid?: string;
  started: boolean; ended: boolean; seqs: Set<number>; segs: Map<number, Segment>; counted: number;
  end?: number; outcome?: Outcome; mediaMs?: number; mediaCounted: boolean;
}

const GRAINS: [Granularity, number][] = [['hour', HOUR_MS], ['day', DAY_MS]];

export class MemoryUsageStore implements UsageStore {
  private readonly sessionsByKey = new Map<string, Session>();
  private readonly buckets_ = new Map<string, Map<number, BucketRow>>(); // tenant\0endpoint\0granularity → start → row
  private readonly tenantSet = new Set<string>();
  private lastPrune = 0;

  constructor(private readonly retentionMs: number, private readonly now: () => number) {}

  async apply(events: LedgerEvent[]): Promise<void> {
    for (const e of events) this.applyOne(e);
    this.prune();
  }

  private session(k: string): Session {
    let s = this.sessionsByKey.get(k);
    if (!s) {
      s = { sessionKey: k, started: false, ended: false, seqs: new Set(), segs: new Map(), counted: 0, mediaCounted: false };
      this.sessionsByKey.set(k, s);
    }
    return s;
  }

  private applyOne(e: LedgerEvent): void {
    const s = this.session(e.k);
    if (e.t === 'start') {
      if (s.started) return;
      Object.assign(s, { started: true, tenant: e.tenant, endpoint: e.endpoint, start: e.at, iid: e.iid });
      this.tenantSet.add(e.tenant);
      this.bump(s, 'sessions', 1);
    } else if (e.t === 'upstream') {
      const seg = segment(s, e);
      if (seg) seg.usid = e.usid;
    } else if (e.t === 'usage') {
      if (s.seqs.has(e.seq)) return;
      const seg = segment(s, e);
      if (!seg) return;
      s.seqs.add(e.seq);
      if (e.kind === 'final') seg.final = e.micro;
      else seg.dsum += e.micro;
    } else {
      if (s.ended) return;
      Object.assign(s, { ended: true, outcome: e.outcome, mediaMs: e.mediaMs, end: e.at });
    }
    this.reconcile(s);
  }

  private reconcile(s: Session): void {
    if (s.tenant === undefined || s.start === undefined) return;
    const target = credits(s);
    if (target !== s.counted) {
      this.bump(s, 'micro', target - s.counted);
      s.counted = target;
    }
    if (s.mediaMs !== undefined && !s.mediaCounted) {
      this.bump(s, 'mediaMs', s.mediaMs);
      s.mediaCounted = true;
    }
  }

  private bump(s: Session, field: 'micro' | 'sessions' | 'mediaMs', delta: number): void {
    if (s.tenant === undefined || s.endpoint === undefined || s.start === undefined) return;
    for (const [g, ms] of GRAINS) {
      const start = s.start - (s.start % ms);
      const id = `${s.tenant}\0${s.endpoint}\0${g}`;
      let m = this.buckets_.get(id);
      if (!m) this.buckets_.set(id, (m = new Map()));
      const row = m.get(start) ?? { start, micro: 0, sessions: 0, mediaMs: 0 };
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
    for (const [k, s] of this.sessionsByKey) if (s.start !== undefined && s.start < cutoff) this.sessionsByKey.delete(k);
  }

  async buckets(q: { tenant: string; endpoints: readonly Endpoint[]; granularity: Granularity; from: number; to: number }): Promise<BucketRow[]> {
    const cutoff = this.now() - this.retentionMs;
    const merged = new Map<number, BucketRow>();
    for (const endpoint of q.endpoints) {
      for (const row of this.buckets_.get(`${q.tenant}\0${endpoint}\0${q.granularity}`)?.values() ?? []) {
        if (row.start < q.from || row.start >= q.to || row.start < cutoff) continue;
        if (row.micro === 0 && row.sessions === 0 && row.mediaMs === 0) continue;
        const m = merged.get(row.start) ?? { start: row.start, micro: 0, sessions: 0, mediaMs: 0 };
        m.micro += row.micro;
        m.sessions += row.sessions;
        m.mediaMs += row.mediaMs;
        merged.set(row.start, m);
      }
    }
    return [...merged.values()].sort((a, b) => a.start - b.start);
  }

  async sessions(q: { tenant: string; from: number; to: number; after: SessionCursor | null; limit: number }): Promise<SessionPage> {
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
}

/** The event's segment, created on first use; undefined (event refused) when out of range, as in lua.ts. */
function segment(s: Session, e: { seg?: number }): Segment | undefined {
  const i = segmentOf(e);
  if (i === null) return undefined;
  let seg = s.segs.get(i);
  if (!seg) s.segs.set(i, (seg = { dsum: 0 }));
  return seg;
}

/** Σ over segments of (final ?? sum of deltas). */
function credits(s: Session): number {
  let sum = 0;
  for (const seg of s.segs.values()) sum += seg.final ?? seg.dsum;
  return sum;
}

function toRow(s: Session): SessionRow {
  const segments = [...s.segs.entries()].sort(([a], [b]) => a - b).map(([, seg]) => ({
    upstreamSessionId: seg.usid ?? null, micro: seg.final ?? seg.dsum, estimated: seg.final === undefined,
  }));
  return {
    sessionKey: s.sessionKey, tenant: s.tenant!, endpoint: s.endpoint!, interactionId: s.iid ?? null,
    start: s.start!, end: s.end ?? null, outcome: s.outcome ?? null, mediaMs: s.mediaMs ?? null,
    ...sessionFigures(segments),
  };
}
