// Where audit events are kept to be queried per tenant: in Redis (redis-store.ts) or, without Redis,
// in process memory (memory-store.ts), each bounded in age and in bytes, per tenant and in all. Both
// order a tenant's events by a score (the event's time in µs-like units, see scorer) and page with a
// cursor of the last event given.
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

/** The stores' bounds in bytes: a tenant's trail holds at most `tenantBytes` and its share of
 * `totalBytes` (divided evenly among the tenants that have a trail); past them its oldest go. */
export interface StoreLimits {
  tenantBytes: number;
  totalBytes: number;
}

/** What a tenant may keep now that `trails` tenants have a trail. */
export const shareOf = (l: StoreLimits, trails: number): number =>
  Math.min(l.tenantBytes, Math.floor(l.totalBytes / Math.max(1, trails)));

export interface AuditPage {
  events: AuditEvent[];
  next: AuditCursor | null;
}

export interface AuditStore {
  /** Kept in `tenant`'s trail; with `create` false only if that trail exists already. A store in
   * memory keeps it at once (no promise); Redis resolves once it has it. */
  add(tenant: string, e: AuditEvent, at: number, create: boolean): Promise<void> | undefined;
  range(q: AuditQuery): Promise<AuditPage>;
  close(): Promise<void>;
}

/** A clock stepped back further than this starts the scores again from it. */
const STEP_BACK = 60_000_000;

/** Scores for one store's events: ms × 1000, and past the last one given, so events keep their order,
 * more than 1000 in one millisecond too (2^53 holds it until year 2255). */
export function scorer(): (at: number) => number {
  let last = 0;
  return (at) => {
    const score = at * 1000;
    last = score > last || last - score > STEP_BACK ? score : last + 1;
    return last;
  };
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
