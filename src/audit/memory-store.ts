// Without Redis: one replica's audit events in process memory, a trail per tenant, each bounded in
// age (the retention) and in bytes: a tenant keeps at most its own bound and its share of the total,
// so one tenant's volume drops only its own oldest events, never another's. When a new tenant's trail
// makes the shares smaller, the largest trails give way first.
import type { AuditEvent } from './event.js';
import {
  memberOf,
  pageOf,
  scorer,
  shareOf,
  type AuditPage,
  type AuditQuery,
  type AuditStore,
  type StoreLimits,
} from './store.js';

/** What an entry costs besides its text: its object, the number, the string's header, the array slot. */
const ENTRY_OVERHEAD = 120;

interface Entry {
  at: number;
  score: number;
  member: string;
  cost: number;
}

/** One tenant's events, oldest first, from `head` on (the slots before it are dropped ones). */
class Trail {
  entries: Entry[] = [];
  head = 0;
  bytes = 0;

  get size(): number {
    return this.entries.length - this.head;
  }

  push(e: Entry): void {
    this.entries.push(e);
    this.bytes += e.cost;
  }

  /** Drops the oldest; returns its cost. */
  shift(): number {
    const e = this.entries[this.head];
    this.entries[this.head++] = undefined as unknown as Entry;
    this.bytes -= e.cost;
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
    return e.cost;
  }

  oldest(): Entry | undefined {
    return this.entries[this.head];
  }

  live(): Entry[] {
    return this.entries.slice(this.head);
  }
}

/** V8 keeps a string in one byte a character unless it holds one past Latin-1. */
const costOf = (member: string): number => member.length * (/[\u0100-\uffff]/.test(member) ? 2 : 1) + ENTRY_OVERHEAD;

export class MemoryAuditStore implements AuditStore {
  private readonly trails = new Map<string, Trail>();
  private total = 0;
  private readonly scoreOf = scorer();

  constructor(
    private readonly retentionMs: number,
    private readonly limits: StoreLimits,
    private readonly now: () => number,
  ) {}

  /** Bytes kept, in all and per tenant (for tests and their bounds). */
  usage(): { total: number; tenants: Map<string, number> } {
    return { total: this.total, tenants: new Map([...this.trails].map(([t, trail]) => [t, trail.bytes])) };
  }

  add(tenant: string, e: AuditEvent, at: number, create: boolean): undefined {
    let trail = this.trails.get(tenant);
    if (!trail) {
      if (!create) return;
      trail = new Trail();
      this.trails.set(tenant, trail);
    }
    const member = memberOf(e);
    const cost = costOf(member);
    trail.push({ at, score: this.scoreOf(at), member, cost });
    this.total += cost;
    this.trim(trail, shareOf(this.limits, this.trails.size));
    if (trail.size === 0) this.trails.delete(tenant);
    this.yieldToShares();
  }

  range(q: AuditQuery): Promise<AuditPage> {
    const oldest = this.now() - this.retentionMs;
    const entries = this.trails.get(q.tenant)?.live() ?? [];
    const inRange = entries.filter((e) => e.at >= Math.max(q.from, oldest) && e.at < q.to);
    return Promise.resolve(pageOf(inRange, q));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** The trail's oldest past the retention, then past `bytes`. */
  private trim(trail: Trail, bytes: number): void {
    const oldest = this.now() - this.retentionMs;
    for (let e = trail.oldest(); e && (e.at < oldest || trail.bytes > bytes); e = trail.oldest())
      this.total -= trail.shift();
  }

  /** Past the total (a new tenant's trail made every share smaller): the largest trails give way. */
  private yieldToShares(): void {
    while (this.total > this.limits.totalBytes) {
      let largest: [string, Trail] | undefined;
      for (const entry of this.trails) if (!largest || entry[1].bytes > largest[1].bytes) largest = entry;
      if (!largest || largest[1].size === 0) return;
      this.trim(largest[1], Math.max(0, largest[1].bytes - (this.total - this.limits.totalBytes)));
      if (largest[1].size === 0) this.trails.delete(largest[0]);
    }
  }
}
