// The drain (SIGTERM): from its first moment /readyz says 503 and new sockets are closed with 1012
// (the gateway keeps listening and serving meanwhile). With session records shared between replicas
// (Redis), every session opened with a resume key is handed over at once: its client is closed with
// 1012 and reconnects with its key to another replica, which goes on from the record (src/cluster/
// takeover.ts); a session that cannot be handed over drains as the others. Running sessions go on for up to
// DRAIN_SECONDS (a client may finish on its own), then end gracefully: audio still held for pacing
// goes upstream at once, then `end`, remaining output, usage, the end message, close 1012. A
// session whose upstream does not answer `end` within END_TIMEOUT_MS ends on its own timer, usage
// estimated; anything still open a moment later is aborted the same way, so none stays open in the ledger.
import { setTimeout as sleep } from 'node:timers/promises';
import { handOver } from '../cluster/index.js';
import type { Session } from '../session/index.js';
import { metrics } from '../telemetry/index.js';
import type { ServerDeps, ServerState } from './types.js';

/** After END_TIMEOUT_MS the sessions' own end timers have fired; this is the margin before the backstop. */
const BACKSTOP_MARGIN_MS = 500;
const POLL_MS = 50;

/** No session left, nor a socket waiting to take one over (it becomes a session, handed on at once). */
async function untilNoSessions(state: ServerState, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while ((state.sessions.size > 0 || state.awaiting.size > 0) && Date.now() < deadline) await sleep(POLL_MS);
}

/** Runs the drain once, however often it is called; resolves when no session is left. */
export function drainOnce(deps: ServerDeps, state: ServerState): (seconds: number) => Promise<void> {
  let running: Promise<void> | undefined;
  return (seconds) => (running ??= drain(deps, state, seconds));
}

async function drain(deps: ServerDeps, state: ServerState, seconds: number): Promise<void> {
  const log = deps.logger;
  const started = Date.now();
  state.draining = true;
  const seen = new Set(state.sessions);
  log.info({ event: 'drain_start', sessions: seen.size, drainSeconds: seconds }, 'drain started');
  const handedOver = await handOverAll(deps, state);
  for (const s of seen) if (s.handedOver) seen.delete(s);
  await untilNoSessions(state, seconds * 1000);
  for (const s of [...state.sessions]) {
    seen.add(s);
    s.shutdown(); // may finish it at once (no config yet), which takes it out of the set
  }
  await untilNoSessions(state, deps.settings.endTimeoutMs + BACKSTOP_MARGIN_MS);
  for (const s of [...state.sessions]) {
    seen.add(s);
    s.abort();
  }
  let ended = 0;
  for (const s of seen) if (!s.usageEstimated) ended++;
  const aborted = seen.size - ended;
  metrics.drainSessions.inc({ result: 'ended' }, ended);
  metrics.drainSessions.inc({ result: 'aborted' }, aborted);
  log.info(
    { event: 'drain_end', handedOver, ended, aborted, seconds: (Date.now() - started) / 1000 },
    'drain finished',
  );
}

/** Every resumable session at once; how many left this process for another replica. */
async function handOverAll(deps: ServerDeps, state: ServerState): Promise<number> {
  if (!deps.cluster.records.shared) return 0;
  const resumable = [...state.sessions].filter((s) => s.info.resumeKey !== undefined);
  const results = await Promise.all(resumable.map((s) => handOverFromDrain(deps, s)));
  return results.filter(Boolean).length;
}

/** The session goes to whichever replica its client reconnects to; false: it drains here. Also for a
 * session taken over here once the drain had begun (its resume's upgrade was under way before). */
export function handOverFromDrain(deps: ServerDeps, session: Session): Promise<boolean> {
  const d = {
    ...deps.cluster,
    logger: deps.logger,
    limiter: deps.limiter,
    graceSeconds: deps.settings.resumeGraceSeconds,
  };
  return handOver(d, session).catch(() => false);
}
