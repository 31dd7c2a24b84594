// The flush/end messages of a session's upstream link: held in their order while no upstream session
// is ready, the flushes an upstream session has not answered (asked again of the next one after a
// loss), and at most one end per upstream session.
import type { UpstreamConnection } from '../upstream/index.js';
import type { Control } from './intake.js';

/** flush/end waiting for a ready upstream session: the session has at most two flushes and one end
 *  out at a time, so more is a bug, not a client's doing. */
const MAX_WAITING_CONTROLS = 3;

export class PendingControls {
  readonly #waiting: Control[] = [];
  /** flushes sent to the current upstream session and not answered */
  #flushesOut = 0;
  #endSentTo?: UpstreamConnection;

  /** Keeps `message` for the next ready upstream session; false when an end already waits. */
  hold(message: Control): boolean {
    if (message.type === 'end' && this.#waiting.some((m) => m.type === 'end')) return false;
    if (this.#waiting.length >= MAX_WAITING_CONTROLS)
      throw new Error(`more than ${MAX_WAITING_CONTROLS} flush/end messages waiting for the upstream`);
    this.#waiting.push(message);
    return true;
  }

  /** Sends `message` to the ready upstream session `conn`. */
  send(message: Control, conn: UpstreamConnection | undefined): void {
    if (message.type === 'end') {
      if (this.#endSentTo === conn) return; // this upstream session already has its end
      this.#endSentTo = conn;
    } else this.#flushesOut++;
    conn?.sendJson(message);
  }

  /** The upstream session answered a flush. */
  flushed(): void {
    if (this.#flushesOut > 0) this.#flushesOut--;
  }

  /** For a newly ready upstream session: the flushes the lost one did not answer (first: they were
   *  asked first), then what waited. */
  takeAll(): Control[] {
    const unanswered: Control[] = Array.from({ length: this.#flushesOut }, () => ({ type: 'flush' }));
    this.#flushesOut = 0;
    return [...unanswered, ...this.#waiting.splice(0)];
  }
}
