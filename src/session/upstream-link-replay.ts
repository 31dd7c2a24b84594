// The audio a session's upstream link keeps for a replay, and the bound on what it replays: over a
// session at most MAX_REPLAY_FACTOR times the audio that went upstream once, so a flapping upstream
// cannot multiply the traffic.
import type { ReplayBuffer, ReplayKind, Unit } from '../audio/index.js';

/** Audio replayed over a session, at most this many times the audio that went upstream once. */
const MAX_REPLAY_FACTOR = 4;

export type Replay = ReturnType<ReplayBuffer['replay']>;

export interface ReplayKeeperOptions {
  createReplay(kind: ReplayKind, o: { maxBytes: number }): ReplayBuffer;
  maxBytes: number;
}

export class ReplayKeeper {
  /** made with the first unit, which says the container kind */
  #buffer?: ReplayBuffer;
  /** bytes that went upstream once (the pipeline's units), and bytes replayed over the session */
  #unitBytes = 0;
  #replayedBytes = 0;

  constructor(private readonly o: ReplayKeeperOptions) {}

  /** Keeps an upstream-bound unit; returns it as it goes upstream (after a replay, retimed to continue it). */
  unit(u: Unit, kind: ReplayKind): Unit {
    this.#buffer ??= this.o.createReplay(kind, { maxBytes: this.o.maxBytes });
    this.#unitBytes += u.bytes.length;
    return this.#buffer.add(u);
  }

  /** Bytes of audio kept for a replay now. */
  get heldBytes(): number {
    return this.#buffer?.bufferedBytes ?? 0;
  }

  resumePoint(): { at: number; behind: number } | undefined {
    return this.#buffer?.resumePoint();
  }

  /** The client has every final up to `finalUntil`: the audio before it need not be replayed. */
  release(finalUntil: number): void {
    this.#buffer?.release(finalUntil);
  }

  /** What a new upstream session gets, its audio starting at `finalUntil`; undefined when replaying
   *  it would put the session's replayed audio over its bound. */
  take(finalUntil: number): Replay | undefined {
    this.release(finalUntil);
    if (this.#replayedBytes + (this.#buffer?.bufferedBytes ?? 0) > MAX_REPLAY_FACTOR * this.#unitBytes)
      return undefined;
    const replay = this.#buffer?.replay() ?? { frames: [], offset: finalUntil, bytes: 0 };
    this.#replayedBytes += replay.bytes;
    return replay;
  }

  /** Why take() refused: the figures for the log, and the client's words. */
  spent(): { replayedBytes: number; unitBytes: number; details: string } {
    return {
      replayedBytes: this.#replayedBytes,
      unitBytes: this.#unitBytes,
      details: `the speech service connection kept failing: ${this.#replayedBytes} bytes of audio were replayed to it already, and another replay would exceed ${MAX_REPLAY_FACTOR} times the audio sent`,
    };
  }
}
