// Client resume: a client that connects with `resume=<key>` can drop and come back within
// RESUME_GRACE_SECONDS; meanwhile its session and upstream session go on, and what it misses is kept
// here (bounded) for the socket that takes the session over.
import type { Continuation } from '../audio/index.js';
import type { CoverageState } from './coverage.js';
import type { CreditsSoFar } from './usage-figures.js';

/** Output kept for a detached client; past it the session stops waiting for the client. */
export const MAX_MISSED_BYTES = 1024 * 1024;

/** The handover closes the client right after one of its audio messages arrives, waiting at most
 *  this long: uWS drops what a client sends after the server's close (ws.end(), measured: every
 *  message in flight then is lost), and a live recorder sends a piece every 250-300 ms, so the close
 *  goes out in the quiet after one and no piece is on the wire. */
export const HANDOVER_CLOSE_WAIT_MS = 350;

/** Container headers kept for another replica to parse the rest of the stream with; a stream whose
 *  headers are larger is not handed over (Chromium's WebM headers are about 200 bytes). */
export const MAX_INIT_BYTES = 64 * 1024;

/** What another replica needs to go on with a session (src/cluster keeps it in the session record).
 *  Times are seconds on the client's timeline. */
export interface SessionSnapshot {
  /** the client's validated config, and what the first CONFIG_ACCEPTED told it */
  config: unknown;
  accepted?: { sessionId?: unknown; configuration?: unknown };
  /** when that first CONFIG_ACCEPTED came (ms since the epoch); absent in records of the release before */
  acceptedAt?: number;
  /** its speech and what the finals cover of it so far (media times only) */
  coverage?: CoverageState;
  kind: 'webm' | 'ogg';
  /** the client's container headers (EBML + Segment + Info + Tracks; Ogg ID + comment pages) */
  init: Buffer;
  /** the current upstream session's 0 and the end of the last final delivered */
  offset: number;
  finalUntil: number;
  /** media seconds and bytes of client audio received so far */
  mediaReceived: number;
  audioBytes: number;
  /** upstream segments used so far (the last one's index) and the last usage seq */
  segment: number;
  seq: number;
  /** the session's credits over those segments, and what its client's deltas added up to */
  credits?: CreditsSoFar;
  /** where a successor after a crash goes on: the byte of the client's stream where the oldest
   *  Cluster or page that the finals do not cover whole starts (a client resending from it loses
   *  nothing), and the media received before it. Absent: not known (the successor goes on from
   *  `audioBytes`, skipping to the next Cluster or page) */
  resume?: { audioBytes: number; mediaReceived: number };
  /** only at a handover: what the successor's parser needs to go on mid-container (the open WebM
   *  Cluster's head, bytes of an element not complete yet), see AudioPipeline.continuation */
  continuation?: Continuation;
}

/** A session taken over: its snapshot, and the output its client has not had yet. `crash`: its
 *  owner died (what the client's stream skips past `finalUntil` is counted lost). */
export interface Restore extends SessionSnapshot {
  missed: string[];
  crash: boolean;
}

/** Messages a detached client misses, in order, each to be sent once to the socket that resumes. */
export class MissedOutput {
  private messages: Array<string | Buffer> = [];
  private bytes = 0;

  /** false: over the bound (nothing more is kept; the client is given up). */
  push(message: string | Buffer): boolean {
    this.bytes += message.length;
    if (this.bytes > MAX_MISSED_BYTES) return false;
    this.messages.push(message);
    return true;
  }

  take(): Array<string | Buffer> {
    const out = this.messages;
    this.messages = [];
    this.bytes = 0;
    return out;
  }
}

/** Key order does not matter: a client may serialise its config differently the second time. */
export function sameConfig(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(
          Object.entries(x as Record<string, unknown>).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)),
        )
      : x,
  );
}
