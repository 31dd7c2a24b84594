// Finds a half-open upstream (no FIN, no RST: a crashed host, a dropped NAT entry). As uWS does for
// clients: a ping only after a quiet spell, and any byte at all proves life. One timer, re-armed
// only when it fires: nothing is done per read but noting the time.
import type { UpstreamLiveness } from './types.js';

/** The connection watched. */
export interface Watched {
  isOpen(): boolean;
  ping(): void;
  /** Nothing came back in time: the connection is to be dropped. */
  dead(message: string): void;
}

export class LivenessWatch {
  /** when anything last arrived, and when the unanswered ping left (0: none out) */
  #heardAt = 0;
  #pingAt = 0;
  #timer?: NodeJS.Timeout;

  constructor(
    private readonly l: UpstreamLiveness,
    private readonly peer: Watched,
  ) {}

  heard(): void {
    this.#heardAt = Date.now();
  }

  start(): void {
    this.#heardAt = Date.now();
    this.#timer = setTimeout(this.#check, this.l.pingMs);
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  readonly #check = (): void => {
    if (!this.peer.isOpen()) return; // closing: the socket's close ends the watch
    const l = this.l;
    const now = Date.now();
    if (this.#pingAt > 0 && this.#heardAt < this.#pingAt)
      return this.peer.dead(
        `the speech service stopped answering (no pong in ${Math.round(l.pongTimeoutMs / 100) / 10} s)`,
      );
    const quietFor = now - this.#heardAt;
    if (quietFor < l.pingMs) {
      this.#pingAt = 0;
      this.#timer = setTimeout(this.#check, l.pingMs - quietFor);
      return;
    }
    this.#pingAt = now;
    this.peer.ping();
    this.#timer = setTimeout(this.#check, l.pongTimeoutMs);
  };
}
