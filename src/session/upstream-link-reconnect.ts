// The reconnection budget of a session's upstream link: which losses are one incident, how many
// attempts an incident gets and for how long, the backoff between attempts, and what the client is
// told when the budget is spent. Losses within UPSTREAM_HEALTHY_MS of a replacement's start are one
// incident, so an upstream that accepts and drops again and again runs the budget out.
import type { ErrorId } from '../protocol/index.js';

/** An upstream session that stays up this long ends the incident: the next loss has the whole budget
 *  again. Time, not a final transcript: a healthy upstream hears silence without finals. */
const UPSTREAM_HEALTHY_MS = 10_000;

export interface ReconnectPolicy {
  /** attempts after a loss before the session gives up */
  attempts: number;
  /** time after a loss before the session gives up, however many attempts are left */
  maxSeconds: number;
  /** per-session bound on audio kept for a replay */
  replayBytes: number;
}

/** Why an upstream session was lost or not had: `details` is what the client may be told. */
export interface Loss {
  errorId: ErrorId;
  details: string;
}

/** Backoff before reconnection attempt `attempt` (0-based): 0.2 s doubled, at most 5 s, with equal
 *  jitter (half the step fixed, half random) so sessions that lost one upstream together do not
 *  reconnect together. */
export function reconnectDelay(attempt: number, random: () => number = Math.random): number {
  const step = Math.min(5000, 200 * 2 ** attempt);
  return step / 2 + random() * (step / 2);
}

export class Reconnects {
  /** when the loss being made good happened (0: none) */
  #lostAt = 0;
  /** the incident's first loss, and its attempts and replacements (reset once one stayed up) */
  #incidentAt = 0;
  #attempt = 0;
  #replaced = 0;
  /** when the current upstream session became ready */
  #readyAt = 0;
  /** the current upstream session sent a transcript; the last loss was a stall (it answered, but
   *  transcribed nothing): an upstream that stalls again and again is one incident however long each lasted */
  #transcribed = false;
  #stalled = false;
  /** stalls in the current incident */
  #stalls = 0;
  #lastLoss: Loss = { errorId: 'UPSTREAM_CLOSED', details: '' };
  /** the loss that started the current reconnection (what the client is told if it fails) */
  #cause = this.#lastLoss;
  #timer?: NodeJS.Timeout;

  constructor(private readonly policy: ReconnectPolicy) {}

  /** A loss is being made good: no upstream session has replaced it yet. */
  get reconnecting(): boolean {
    return this.#lostAt > 0;
  }

  get attempts(): number {
    return this.#attempt;
  }

  get lastLoss(): Loss {
    return this.#lastLoss;
  }

  /** What the last upstream session (or attempt) was lost to. */
  lost(loss: Loss): void {
    this.#lastLoss = loss;
  }

  /** The current upstream session sent a transcript message. */
  transcribed(): void {
    this.#transcribed = true;
  }

  /** The current upstream session is dropped for a stall (see stalled in upstream-link.ts). */
  stalled(): void {
    this.#stalled = true;
  }

  /** A loss mid-session: one more of the incident's unless the lost upstream session had stayed up.
   *  `fresh`: a new incident whatever came before (a session taken over from another replica). */
  begin(fresh = false): void {
    this.#lostAt = Date.now();
    const healthy = this.#lostAt - this.#readyAt >= UPSTREAM_HEALTHY_MS && (!this.#stalled || this.#transcribed);
    const stall = this.#stalled;
    this.#stalled = false;
    if (fresh || this.#incidentAt === 0 || healthy) {
      this.#stalls = 0;
      this.#incidentAt = this.#lostAt;
      this.#attempt = 0;
      this.#replaced = 0;
      this.#cause = this.#lastLoss;
    }
    if (stall) this.#stalls++;
  }

  /** The next attempt, `connect` after the backoff; or, with the budget spent, the failure to report. */
  next(connect: () => void): Loss | undefined {
    const { attempts, maxSeconds } = this.policy;
    const spent = (Date.now() - this.#incidentAt) / 1000;
    if (this.#attempt < attempts && spent < maxSeconds) {
      this.#timer = setTimeout(connect, reconnectDelay(this.#attempt++));
      this.#timer.unref?.();
      return undefined;
    }
    const tries = `${this.#attempt} attempts in ${spent.toFixed(1)} s`;
    if (this.#stalls > 0) {
      const { errorId, details } = this.#cause;
      return { errorId, details: `${details}; ${this.#stalls} new connections did not cure it (${tries})` };
    }
    if (this.#replaced > 0) {
      // It was replaced, and lost again before it had stayed up: the connection is flapping.
      return {
        errorId: 'UPSTREAM_UNSTABLE',
        details: `the speech service connection was lost again ${this.#replaced} times within ${UPSTREAM_HEALTHY_MS / 1000} s of being replaced (${tries})`,
      };
    }
    const { errorId, details } = this.#cause;
    const last = this.#attempt > 0 ? ` (last: ${this.#lastLoss.details})` : '';
    return { errorId, details: `${details}; reconnecting failed after ${tries}${last}` };
  }

  /** An upstream session is ready; `replacement`: it made a loss good. */
  ready(replacement: boolean): void {
    if (replacement) {
      this.#lostAt = 0;
      this.#replaced++;
    }
    this.#readyAt = Date.now();
    this.#transcribed = false;
  }

  cancel(): void {
    clearTimeout(this.#timer);
  }
}
