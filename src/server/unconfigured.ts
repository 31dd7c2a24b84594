// Sockets open without a config are not sessions yet: no ledger session, no tenant slot. What
// bounds them is this count per token subject, taken at the upgrade and given back once a valid
// config arrives (the tenant's cap bounds the socket from then on) or the socket closes. Per
// replica: it bounds one process's memory and sockets, which is what a flood of idle sockets costs.
import { metrics } from '../telemetry/index.js';

export class UnconfiguredSockets {
  private readonly open = new Map<string, number>();

  /** `max` 0: no bound (still counted, for the gauge). */
  constructor(private readonly max: number) {}

  /** The count's key: a token's tenant and subject (tokens without a subject share their tenant's). */
  static keyOf(tenant: string, subject: string | undefined): string {
    return `${tenant}\u0000${subject ?? ''}`;
  }

  /** false: `key` is at its bound and the socket is refused. */
  take(key: string): boolean {
    const n = this.open.get(key) ?? 0;
    if (this.max > 0 && n >= this.max) return false;
    this.open.set(key, n + 1);
    metrics.unconfiguredSockets.inc();
    return true;
  }

  release(key: string): void {
    const n = this.open.get(key);
    if (n === undefined) return;
    if (n <= 1) this.open.delete(key);
    else this.open.set(key, n - 1);
    metrics.unconfiguredSockets.dec();
  }
}
