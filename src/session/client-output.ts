// What the session sends its client: every send checked (a client that stops reading is closed and
// the session told, rather than losing a final transcript or its usage without a trace), interim
// transcripts shed while the client is behind, and output held, bounded, while the client is away or
// resuming (a drop, a handover), to be given to the socket that takes the session over.
import { holdsNoFinal } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import { MissedOutput } from './resume.js';

/** What the server hands a session to talk to its client socket. */
export interface ClientSink {
  /** false: the client is not reading (the message was dropped, or its backlog is over the bound). */
  sendText(text: string | Buffer): boolean;
  /** Bytes sent to the client and not yet taken by it. */
  backlog(): number;
  close(code: number, reason: string): void;
  /** Once closed: what it took and its client is known not to have got (through the internal hop). */
  undelivered(): Array<string | Buffer>;
  /** Behind the internal hop only: calls `done` once the relaying replica passed everything sent so
   * far to the client (or after a bounded wait for it to say so). */
  whenDelivered?(done: () => void): void;
}

/** Past this much unread output, interim transcripts are dropped (finals, facts, usage never are). */
const SHED_BACKLOG_BYTES = 64 * 1024;

const UPSTREAM_TO_CLIENT = metrics.forwardLatency.labels('upstream_to_client');

export interface ClientOutputEvents {
  /** The client stopped reading (called after the send, never inside it). */
  tooSlow(): void;
  /** The output held for an absent client went over its bound: the session stops waiting for it. */
  heldOverflow(): void;
  /** What was kept for the client went to its socket: the finals in it are the client's now. */
  given(): void;
}

export class ClientOutput {
  /** the socket's own truth */
  private open = true;
  private slow = false;
  /** while the client is away or resuming: what it has not been given yet */
  private held?: MissedOutput;

  constructor(
    private sink: ClientSink,
    private readonly on: ClientOutputEvents,
  ) {}

  get isOpen(): boolean {
    return this.open;
  }

  get isSlow(): boolean {
    return this.slow;
  }

  get holding(): boolean {
    return this.held !== undefined;
  }

  /** The session's output, in order: held while the client is away, else sent now. */
  send(text: string | Buffer): void {
    if (this.held) return this.keep(text);
    this.sendNow(text);
  }

  /** An upstream message relayed as its bytes; `receivedAt` (performance.now()) when it was read. */
  relay(data: Buffer, receivedAt = performance.now()): void {
    this.send(data);
    UPSTREAM_TO_CLIENT.observe((performance.now() - receivedAt) / 1000);
  }

  /** A transcript, relayed unless the client is behind and it holds no final (interim results only:
   *  the only messages a slow client can do without). false: dropped. */
  relayTranscript(data: Buffer, receivedAt?: number): boolean {
    if (this.sink.backlog() > SHED_BACKLOG_BYTES && holdsNoFinal(data)) {
      metrics.shedMessages.inc({ kind: 'interim_transcript' });
      return false;
    }
    this.relay(data, receivedAt);
    return true;
  }

  /** To the socket now, past the output a resuming client has not been given yet. */
  sendNow(text: string | Buffer): void {
    if (!this.open || this.slow) return;
    if (this.sink.sendText(text)) return;
    this.slow = true;
    queueMicrotask(() => this.on.tooSlow());
  }

  /** From now on output waits for the next socket (kept if already holding). */
  hold(messages: Iterable<string | Buffer> = []): void {
    this.held ??= new MissedOutput();
    for (const m of messages) this.keep(m);
  }

  /** What was held, in order; output is sent again from now on. */
  release(): Array<string | Buffer> {
    const out = this.held?.take() ?? [];
    this.held = undefined;
    return out;
  }

  /** `first` (a resumed socket's answer), then what was held, go to the socket now, in order, and
   * output is sent from now on; how many were held. */
  sendHeld(first?: string): number {
    const held = this.release();
    if (first !== undefined) this.send(first);
    for (const m of held) this.send(m);
    this.on.given();
    return held.length;
  }

  close(code: number, reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.sink.close(code, reason);
  }

  /** `sink` closed: true when it was this session's own (not an older socket already replaced). */
  closed(sink: ClientSink): boolean {
    if (sink !== this.sink) return false;
    this.open = false;
    return true;
  }

  /** A newer socket takes the output over; an older one still open is closed with `why`. */
  replace(sink: ClientSink, why: { code: number; reason: string }): void {
    const older = this.sink;
    this.sink = sink;
    if (this.open) older.close(why.code, why.reason);
    this.open = true;
    this.slow = false;
  }

  /** `done` once the client has what was sent so far (see ClientSink.whenDelivered), unless another
   * socket has taken the output over meanwhile. */
  whenDelivered(done: () => void): void {
    const sink = this.sink;
    if (!sink.whenDelivered) return queueMicrotask(done);
    sink.whenDelivered(() => this.sink === sink && this.open && done());
  }

  /** What the closed socket took and its client is known not to have got. */
  undelivered(): Array<string | Buffer> {
    return this.sink.undelivered();
  }

  private keep(text: string | Buffer): void {
    if (this.held?.push(text)) return;
    this.held = undefined;
    metrics.resumes.inc({ result: 'missed_overflow' });
    queueMicrotask(() => this.on.heldOverflow());
  }
}
