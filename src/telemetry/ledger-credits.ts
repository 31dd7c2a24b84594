// speech_gateway_ledger_credits{tenant}: the usage ledger's own cumulative credits per tenant, read
// from its store at each scrape. With Redis every replica reads the same totals, so a dashboard
// takes max by (tenant) and a range's credits are the rise over it: nothing is lost when a pod a
// rolling update replaced exits before its last scrape (a per-replica counter loses what it
// counted last). The totals move in the same atomic step as the usage API's buckets, so they add
// up to the API's figures. Tenant names: the first METRICS_MAX_TENANTS tenants in the order they
// first started a session in the ledger (the same on every replica); the rest are summed as 'other'.
import { Counter, Gauge } from 'prom-client';
import { logger } from './logger.js';
import { registry } from './metrics.js';
import { maxTenantLabels } from './tenant-label.js';

/** Cumulative credits (integer micro-credits) per tenant, in first-start order. */
export type LedgerTotals = () => Promise<Array<{ tenant: string; micro: number }>>;

let source: LedgerTotals | null = null;

export const ledgerReadFailures = new Counter({
  name: 'speech_gateway_ledger_read_failures_total',
  help: 'Scrapes that could not read the ledger credit totals (speech_gateway_ledger_credits left out of that scrape)',
  registers: [registry],
});

export const ledgerCredits = new Gauge<'tenant'>({
  name: 'speech_gateway_ledger_credits',
  help: "The usage ledger's cumulative credits per tenant (the same on every replica sharing Redis): a range's credits are its rise over the range",
  labelNames: ['tenant'],
  registers: [registry],
  async collect() {
    this.reset();
    if (!source) return;
    try {
      for (const [tenant, credits] of capped(await source())) this.set({ tenant }, credits);
    } catch (err) {
      // A scrape without the gauge, not a failed scrape: the other metrics still count.
      ledgerReadFailures.inc();
      logger.warn({ err: (err as Error).message }, 'ledger credit totals not read; left out of this scrape');
    }
  },
});

/** Credits per label: the first maxTenantLabels() tenants (first-start order) by name, the rest summed as 'other'. */
function capped(totals: Array<{ tenant: string; micro: number }>): Map<string, number> {
  const max = maxTenantLabels();
  const micro = new Map<string, number>();
  totals.forEach(({ tenant, micro: m }, i) => {
    const label = i < max ? tenant : 'other';
    micro.set(label, (micro.get(label) ?? 0) + m);
  });
  return new Map([...micro].map(([label, m]) => [label, m / 1e6]));
}

/** The ledger whose totals the gauge reports (one per process); null: none (the gauge is left out). */
export function setLedgerTotals(f: LedgerTotals | null): void {
  source = f;
}

/** The ledger's totals are reported by this function now (so a closing ledger unsets only its own). */
export const isLedgerTotals = (f: LedgerTotals): boolean => source === f;
