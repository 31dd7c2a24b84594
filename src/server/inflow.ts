// A client's frames, a budget per turn of the event loop. Hand-written because uWS gives no way to
// stop reading a WebSocket (only an HTTP body can pause) and hands over in one turn whatever the
// socket has ready: from a client in another process writing as fast as it can, its whole burst (a
// million 22-byte frames in one turn, measured), at about 0.8 µs a frame of uWS's work and ours,
// which no JavaScript can interrupt; only closing the socket stops it. Past the budget, a socket's
// frames are copied into a queue, in order, and handled a budget a turn after the loop has served
// everyone else. The queue is bounded in bytes (a frame costs its length plus its bookkeeping);
// repeats of one text frame (a flood of flushes) are counted rather than copied, and binary frames
// in a row are joined (audio is a byte stream to the session). It is bounded in frames too, which is
// what bounds the time one burst holds the loop. Past either bound the client is closed: it sends
// faster than the gateway can read.

import { loopTurn } from './turn.js';

/** Frames a socket gets handled in one turn before the rest wait for the next. */
export const FRAMES_PER_TURN = 1024;
/** Bytes a socket may have waiting; past them it is closed (CLOSE.flooded, 1008). */
export const MAX_QUEUED_BYTES = 8 * 1024 * 1024;
/** Frames a socket may have waiting; past them it is closed too. What one burst can hold the loop
 * for: about 0.2 s on a 2-core machine, where a repeated flush costs only 2 bytes of the byte bound
 * (4 million of them would be 3 s). 256 turns' budget: no client that reads its answers gets near it. */
export const MAX_QUEUED_FRAMES = 256 * FRAMES_PER_TURN;
/** Frames every socket together may queue in one turn (uWS reads every ready socket in the same
 * turn, so bursts of several sockets add up); the socket whose frame goes past it is closed. */
const MAX_TURN_QUEUED_FRAMES = MAX_QUEUED_FRAMES;

let turnQueued = 0;
let turnQueuedIn = -1;

/** One more frame queued this turn by any socket: false past the process's bound. */
function queuedInTurn(): boolean {
  const turn = loopTurn();
  if (turnQueuedIn !== turn) {
    turnQueuedIn = turn;
    turnQueued = 0;
  }
  return ++turnQueued <= MAX_TURN_QUEUED_FRAMES;
}
/** What a waiting frame costs besides its bytes: the copy's object and its queue entry. */
const ENTRY_COST = 160;
/** What a repeat of the last queued text frame costs: its count is bounded too. */
const REPEAT_COST = 2;
/** A repeated text frame is compared byte for byte only up to this size. */
const MAX_REPEAT_BYTES = 256;
/** Binary frames in a row are joined up to this size. */
const MAX_JOINED_BYTES = 64 * 1024;

/** A queued frame (`count` times) or binary frames joined: `size` bytes of `bytes`, whose length is
 * what it costs; `frames`: the client's frames in it. */
interface Entry {
  bytes: Buffer;
  size: number;
  binary: boolean;
  count: number;
  frames: number;
  cost: number;
}

export interface InflowHandlers {
  /** handles one frame (uWS's buffer or a queued copy: either is valid only during the call) */
  deliver(data: ArrayBuffer, binary: boolean): void;
  /** the client sent more than MAX_QUEUED_BYTES ahead of the gateway */
  flooded(): void;
}

export class Inflow {
  private used = 0;
  private usedIn = -1;
  private readonly queue: Entry[] = [];
  private head = 0;
  private bytes = 0;
  private frames = 0;
  private scheduled = false;
  /** no frame is handled any more (flooded, or closed and caught up) */
  private dead = false;
  private onClosed?: () => void;

  constructor(private readonly on: InflowHandlers) {}

  /** A frame from uWS: handled now within the turn's budget, else queued behind the others. */
  accept(data: ArrayBuffer, binary: boolean): void {
    if (this.dead) return;
    if (this.head === this.queue.length && this.spend()) return this.on.deliver(data, binary);
    if (++this.frames > MAX_QUEUED_FRAMES || !queuedInTurn()) return this.flood();
    const last = this.queue.length > this.head ? this.queue[this.queue.length - 1] : undefined;
    if (last && binary && last.binary && last.size + data.byteLength <= MAX_JOINED_BYTES) return this.join(last, data);
    const repeat = last !== undefined && !binary && !last.binary && sameBytes(last.bytes, data);
    const cost = repeat ? REPEAT_COST : data.byteLength + ENTRY_COST;
    if (!this.charge(cost)) return;
    if (repeat) {
      last.count++;
      last.frames++;
      last.cost += cost;
    } else {
      const bytes = Buffer.from(data.slice(0));
      this.queue.push({ bytes, size: bytes.length, binary, count: 1, frames: 1, cost });
    }
    this.schedule();
  }

  /** A binary frame appended to the binary frames queued last (room doubled as needed). */
  private join(last: Entry, data: ArrayBuffer): void {
    const size = last.size + data.byteLength;
    if (size > last.bytes.length) {
      const room = Math.min(MAX_JOINED_BYTES, Math.max(2 * last.bytes.length, size));
      if (!this.charge(room - last.bytes.length)) return;
      last.cost += room - last.bytes.length;
      const grown = Buffer.from(new ArrayBuffer(room));
      last.bytes.copy(grown, 0, 0, last.size);
      last.bytes = grown;
    }
    last.bytes.set(new Uint8Array(data), last.size);
    last.size = size;
    last.frames++;
  }

  /** Counts `cost` more bytes waiting; false (and the client flooded) past the bound. */
  private charge(cost: number): boolean {
    this.bytes += cost;
    if (this.bytes <= MAX_QUEUED_BYTES) return true;
    this.flood();
    return false;
  }

  /** The socket closed: the queued frames are handled first, then `closed`. */
  close(closed: () => void): void {
    this.onClosed = closed;
    if (!this.dead && this.head < this.queue.length) return;
    this.finish();
  }

  private finish(): void {
    this.dead = true;
    const closed = this.onClosed;
    this.onClosed = undefined;
    closed?.();
  }

  /** One frame of this turn's budget, if any is left. */
  private spend(): boolean {
    this.enterTurn();
    return ++this.used <= FRAMES_PER_TURN;
  }

  private enterTurn(): void {
    const turn = loopTurn();
    if (this.usedIn === turn) return;
    this.usedIn = turn;
    this.used = 0;
  }

  private flood(): void {
    this.dead = true;
    this.queue.length = this.head = this.bytes = this.frames = 0;
    this.on.flooded();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.handleQueued);
  }

  private readonly handleQueued = () => {
    this.scheduled = false;
    if (this.dead) return;
    let budget = FRAMES_PER_TURN;
    while (budget > 0 && this.head < this.queue.length && !this.dead) {
      const entry = this.queue[this.head];
      const n = Math.min(entry.count, budget);
      const data = entry.bytes.buffer.slice(entry.bytes.byteOffset, entry.bytes.byteOffset + entry.size) as ArrayBuffer;
      for (let i = 0; i < n && !this.dead; i++) this.on.deliver(data, entry.binary);
      budget -= n;
      entry.count -= n;
      const freed = entry.count === 0 ? entry.cost : n * REPEAT_COST;
      entry.cost -= freed;
      this.bytes -= freed;
      // A repeat's frames are its deliveries; joined frames go in one.
      const handled = entry.count === 0 ? entry.frames : n;
      entry.frames -= handled;
      this.frames -= handled;
      if (entry.count === 0) this.queue[this.head++] = undefined as unknown as Entry;
    }
    // What this turn handled counts against the frames uWS hands over in the same turn.
    this.enterTurn();
    this.used += FRAMES_PER_TURN - budget;
    if (this.head === this.queue.length) {
      this.queue.length = this.head = 0;
      if (this.onClosed) return this.finish();
    }
    if (!this.dead && this.head < this.queue.length) this.schedule();
  };
}

function sameBytes(kept: Buffer, data: ArrayBuffer): boolean {
  if (kept.length !== data.byteLength || data.byteLength > MAX_REPEAT_BYTES) return false;
  return kept.equals(new Uint8Array(data));
}
