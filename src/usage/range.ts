// GET /v1/usage over any [from, to). The stored buckets are UTC hours and days, but a range's edges
// need not be on them (a dashboard's "last two hours"): the whole days and hours inside the range come
// from the buckets, the parts of an hour at either edge from the session records that start there (a
// session counts in the bucket of its start, with the same figures as its record, so the two add up).
// The answer keeps the granularity's grid, each bucket cut to the range: when `from` is not on an edge
// the first bucket starts at `from`. A range on its edges reads the granularity's buckets only, as before.
import type { Endpoint } from '../protocol/index.js';
import {
  DAY_MS,
  HOUR_MS,
  PAGE_SIZE,
  addBucket,
  emptyBucket,
  granularityMs,
  type BucketRow,
  type Granularity,
  type UsageStore,
} from './model.js';

export interface RangeQuery {
  tenant: string;
  endpoints: readonly Endpoint[];
  granularity: Granularity;
  from: number;
  to: number;
}

const floorTo = (t: number, ms: number): number => Math.floor(t / ms) * ms;
const ceilTo = (t: number, ms: number): number => Math.ceil(t / ms) * ms;

/** The tenant's figures in [q.from, q.to), in q.granularity's buckets (cut to the range), sorted by start. */
export async function usageInRange(store: UsageStore, q: RangeQuery): Promise<BucketRow[]> {
  const out = new Map<number, BucketRow>();
  const grid = granularityMs(q.granularity);
  const add = (rows: BucketRow[]): void => {
    for (const r of rows) {
      const start = Math.max(floorTo(r.start, grid), q.from);
      const b = out.get(start) ?? emptyBucket(start);
      addBucket(b, r);
      out.set(start, b);
    }
  };
  const hFrom = ceilTo(q.from, HOUR_MS);
  const hTo = floorTo(q.to, HOUR_MS);
  if (hFrom >= hTo) {
    add(await sessionFigures(store, q, q.from, q.to));
  } else {
    if (q.from < hFrom) add(await sessionFigures(store, q, q.from, hFrom));
    if (hTo < q.to) add(await sessionFigures(store, q, hTo, q.to));
    for (const part of wholeHours(q.granularity, hFrom, hTo)) {
      add(await store.buckets({ ...q, granularity: part.granularity, from: part.from, to: part.to }));
    }
  }
  return [...out.values()].sort((a, b) => a.start - b.start);
}

/** [from, to) on hour edges as stored buckets: by day, whole days read from day buckets and the hours
 *  around them from hour buckets; by hour, hour buckets. */
function wholeHours(
  g: Granularity,
  from: number,
  to: number,
): { granularity: Granularity; from: number; to: number }[] {
  const dFrom = ceilTo(from, DAY_MS);
  const dTo = floorTo(to, DAY_MS);
  if (g === 'hour' || dFrom >= dTo) return [{ granularity: 'hour', from, to }];
  return [
    { granularity: 'hour' as const, from, to: dFrom },
    { granularity: 'day' as const, from: dFrom, to: dTo },
    { granularity: 'hour' as const, from: dTo, to },
  ].filter((p) => p.from < p.to);
}

/** The sessions of the query's endpoints starting in [from, to) (at most an hour), one row each. */
async function sessionFigures(store: UsageStore, q: RangeQuery, from: number, to: number): Promise<BucketRow[]> {
  const rows: BucketRow[] = [];
  let after = null;
  do {
    const page = await store.sessions({ tenant: q.tenant, from, to, after, limit: PAGE_SIZE });
    for (const r of page.rows) {
      // As its bucket counts it: media and speech once it ended, speech only as measured.
      if (q.endpoints.includes(r.endpoint))
        rows.push({
          start: r.start,
          micro: r.micro,
          sessions: 1,
          mediaMs: r.mediaMs ?? 0,
          speechMs: r.speechMs ?? 0,
          coveredMs: r.coveredMs ?? 0,
        });
    }
    after = page.next;
  } while (after);
  return rows;
}
