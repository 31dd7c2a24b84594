// Where audit events are kept to be queried per tenant: in Redis (redis-store.ts) or, without Redis,
// here in process memory, bounded in count and age. Both order a tenant's events by a score (the
// event's time in µs-like units, see scoreOf) and page with a cursor of the last event given.
import type { AuditEvent } from './event.js';

export interface AuditCursor {
  score: number;
  member: string;
}

export interface AuditQuery {
  tenant: string;
  /** ms epoch, inclusive */
  from: number;
  /** ms epoch, exclusive */
  to: number;
  limit: number;
  after: AuditCursor | null;
}

export interface AuditPage {
  events: AuditEvent[];
  next: AuditCursor | null;
}

export interface AuditStore {
  add(tenant: string, e: AuditEvent, at: number): Promise<void>;
  range(q: AuditQuery): Promise<AuditPage>;
  close(): Promise<void>;
}

let seq = 0;
/** ms × 1000 plus a counter: events of one millisecond keep their order (2^53 holds it until year 2255). */
export function scoreOf(at: number): number {
  seq = (seq + 1) % 1000;
  return at * 1000 + seq;
}

/** A stored member: a random prefix (two identical events stay two members), a space, the JSON. */
export function memberOf(e: AuditEvent): string {
  return `${Math.random().toString(36).slice(2, 10)} ${JSON.stringify(e)}`;
}

export function eventOf(member: string): AuditEvent {
  return JSON.parse(member.slice(member.indexOf(' ') + 1)) as AuditEvent;
}

/** Entries of one score are ordered by their bytes, as Redis orders them. */
export function isAfter(entry: AuditCursor, cursor: AuditCursor | null): boolean {
  if (!cursor || entry.score !== cursor.score) return !cursor || entry.score > cursor.score;
  return Buffer.compare(Buffer.from(entry.member), Buffer.from(cursor.member)) > 0;
}

/** One page of `entries` (in order, from the query's range): at most `limit`, and the cursor for more. */
export function pageOf(entries: AuditCursor[], q: AuditQuery): AuditPage {
  const rows = entries.filter((e) => isAfter(e, q.after)).slice(0, q.limit + 1);
  const more = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  return { events: page.map((r) => eventOf(r.member)), next: more ? page[page.length - 1] : null };
}

/** Without Redis: one replica's events, the oldest dropped past `maxEvents` or `retentionMs`. */
export class MemoryAuditStore implements AuditStore {
  private readonly entries: Array<AuditCursor & { tenant: string; at: number }> = [];

  constructor(
    private readonly retentionMs: number,
    private readonly maxEvents: number,
    private readonly now: () => number,
  ) {}

  add(tenant: string, e: AuditEvent, at: number): Promise<void> {
    this.entries.push({ tenant, at, score: scoreOf(at), member: memberOf(e) });
    const oldest = this.now() - this.retentionMs;
    let drop = Math.max(0, this.entries.length - this.maxEvents);
    while (drop < this.entries.length && this.entries[drop].at < oldest) drop++;
    if (drop > 0) this.entries.splice(0, drop);
    return Promise.resolve();
  }

  range(q: AuditQuery): Promise<AuditPage> {
    const oldest = this.now() - this.retentionMs;
    const inRange = this.entries.filter(
      (e) => e.tenant === q.tenant && e.at >= Math.max(q.from, oldest) && e.at < q.to,
    );
    return Promise.resolve(pageOf(inRange, q));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
