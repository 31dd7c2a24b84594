// Identical refusals and usage API calls, folded: a client that is refused 100,000 times, or a token
// that polls the API thousands of times a second, must not write as many lines to the log nor push a
// tenant's history out of its store. The first event of a kind is written as it happens; the same
// again (same tenant, who, event, outcome, reason, error id, address) within the window is counted,
// and at the window's end one event with `count` (and `since`, the first of them) stands for them.
// The kinds open at once are bounded per tenant: past the bound, the rest of a tenant's are folded by
// event, outcome, reason and error alone (their addresses and callers are not kept); past the bound
// in all (as many tenant names as a caller cares to make up), by those without the tenant.
import type { AuditInput } from './event.js';

/** What makes two events the same: everything but the fields that tell one session or request apart. */
const KEY_FIELDS = [
  'tenant',
  'trail',
  'subject',
  'clientId',
  'caller',
  'asked',
  'event',
  'outcome',
  'reason',
  'error',
  'status',
  'path',
  'endpoint',
  'environment',
  'address',
  'peer',
] as const;
/** Past the per-tenant bound: folded by these only; past the bound in all, by these without the tenant. */
const BROAD_FIELDS = ['tenant', 'trail', 'event', 'outcome', 'reason', 'error', 'status', 'path'] as const;
const GLOBAL_FIELDS = BROAD_FIELDS.slice(2);

/** Kinds open at once per tenant (events without a tenant: MAX_KINDS_UNATTRIBUTED), and in all. */
const MAX_KINDS_PER_TENANT = 256;
const MAX_KINDS_UNATTRIBUTED = 1024;
const MAX_KINDS = 16_384;

interface Kind {
  /** the fields every event of the kind has alike */
  fields: AuditInput;
  tenant: string;
  broad: boolean;
  /** events folded since the last one written, the first of them at `since` */
  count: number;
  since: number;
  until: number;
}

const pick = (input: AuditInput, fields: readonly (keyof AuditInput)[]): AuditInput => {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (input[f] !== undefined) out[f] = input[f];
  return out as unknown as AuditInput;
};

/** Only refusals and usage API calls repeat like this; a session's steps are each their own. */
const foldable = (e: AuditInput): boolean => e.outcome === 'refused' || e.event === 'usage_api_call';

export class Coalescer {
  private readonly kinds = new Map<string, Kind>();
  private readonly perTenant = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  /** `write`: an event to write now, or a kind's summary at its window's end. */
  constructor(
    private readonly windowMs: number,
    private readonly write: (e: AuditInput, at: number) => void,
    private readonly now: () => number,
  ) {
    this.timer = setInterval(() => this.sweep(false), Math.max(250, windowMs / 4));
    this.timer.unref();
  }

  /** True when `e` is to be written now; false when it is counted in its kind's next summary. */
  offer(e: AuditInput, at: number): boolean {
    if (!foldable(e)) return true;
    const tenant = e.tenant ?? '';
    const exact = JSON.stringify(KEY_FIELDS.map((f) => e[f] ?? null));
    const known = this.kinds.get(exact);
    if (known) return this.fold(known, at);
    const open = this.perTenant.get(tenant) ?? 0;
    const allFull = this.kinds.size >= MAX_KINDS;
    if (!allFull && open < (tenant ? MAX_KINDS_PER_TENANT : MAX_KINDS_UNATTRIBUTED))
      return this.open(exact, pick(e, KEY_FIELDS), tenant, false, at);
    const fields = allFull ? GLOBAL_FIELDS : BROAD_FIELDS;
    const broad = `${allFull ? '**' : '*'}${JSON.stringify(fields.map((f) => e[f] ?? null))}`;
    const wide = this.kinds.get(broad);
    // A broad kind's first event is written whole; the rest are counted without their who and where.
    return wide ? this.fold(wide, at) : this.open(broad, pick(e, fields), tenant, true, at);
  }

  /** Every summary still open, written now (at close). */
  flush(): void {
    clearInterval(this.timer);
    this.sweep(true);
  }

  private open(key: string, fields: AuditInput, tenant: string, broad: boolean, at: number): true {
    this.kinds.set(key, { fields, tenant, broad, count: 0, since: 0, until: at + this.windowMs });
    if (!broad) this.perTenant.set(tenant, (this.perTenant.get(tenant) ?? 0) + 1);
    return true;
  }

  private fold(kind: Kind, at: number): false {
    if (kind.count === 0) kind.since = at;
    kind.count++;
    return false;
  }

  /** Kinds whose window ended: their summary written, and kept open another window while they repeat. */
  private sweep(all: boolean): void {
    const at = this.now();
    for (const [key, kind] of this.kinds) {
      if (!all && kind.until > at) continue;
      if (kind.count > 0) {
        const since = new Date(kind.since).toISOString();
        this.write({ ...kind.fields, count: kind.count, since }, at);
      }
      if (kind.count > 0 && !all) {
        kind.count = 0;
        kind.until = at + this.windowMs;
        continue;
      }
      this.kinds.delete(key);
      if (kind.broad) continue;
      const left = (this.perTenant.get(kind.tenant) ?? 1) - 1;
      if (left > 0) this.perTenant.set(kind.tenant, left);
      else this.perTenant.delete(kind.tenant);
    }
  }
}
