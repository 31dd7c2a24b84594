// Handed-over sessions nobody resumed in time: whichever replica's janitor sees one first ends its
// ledger session (with the coverage its record holds: a handed-over record is whole) and releases
// its tenant slot.
import { coverageOf } from '../session/index.js';
import { metrics } from '../telemetry/index.js';
import type { SessionLimiter, UsageLedger } from '../usage/index.js';
import type { TakeoverDeps } from './takeover.js';

const JANITOR_MS = 5000;

/** Ends the ledger session and releases the slot of every handed-over session nobody resumed in time. */
export function startJanitor(d: TakeoverDeps & { ledger: UsageLedger; limiter: SessionLimiter }): () => void {
  const sweep = async () => {
    for (const r of await d.records.reap(Date.now())) {
      d.ledger.sessionEnded({
        sessionKey: r.sessionKey,
        outcome: 'client_gone',
        mediaSeconds: r.timeline?.mediaReceived ?? 0,
        endedAt: Date.now(),
        coverage: coverageOf(r.timeline?.coverage), // a handed-over record is whole: written last
      });
      await d.limiter.adopt(r.tenant, r.sessionKey); // the slot is this replica's to release now
      await d.limiter.release(r.tenant, r.sessionKey);
      metrics.handovers.inc({ result: 'expired' });
      d.logger.info(
        { event: 'handover_expired', session: r.sessionKey },
        'a handed-over session was not resumed in time; ended',
      );
    }
  };
  const timer = setInterval(
    () =>
      void sweep().catch((err: Error) =>
        d.logger.warn({ event: 'janitor_failed', err: err.message }, 'handed-over sessions not swept'),
      ),
    JANITOR_MS,
  );
  timer.unref();
  return () => clearInterval(timer);
}
