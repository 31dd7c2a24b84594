// A session's ordered output: every message, wait and close goes through one queue, so delays and
// stalls never reorder them. The fault switches are read as each step runs, so switching one
// reaches the messages already queued.
import type { WebSocket } from 'ws';
import type { SessionRecord } from './session-record.js';
import type { FaultSwitches } from './types.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Outbox {
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private ws: WebSocket,
    private record: SessionRecord,
    private faults: FaultSwitches,
    /** marks the session closed, just before the queue closes the socket */
    private markClosed: (code: number) => void,
  ) {}

  /** Holds back everything queued after this for `ms` (configDelayMs). */
  wait(ms: number): void {
    if (ms > 0) this.enqueue(() => sleep(ms));
  }

  /** messageDelayMs acts like network latency: each message leaves that long after it was made. */
  send(msg: unknown, afterSend?: () => void): void {
    const due = Date.now() + this.faults.messageDelayMs;
    const pad = this.faults.padTranscriptBytes;
    if (pad > 0 && (msg as { type?: string }).type === 'transcript')
      msg = { ...(msg as object), padding: 'x'.repeat(pad) };
    this.enqueue(async () => {
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      await this.whileStalled();
      if (this.record.closed) return;
      this.record.sent.push(msg);
      this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg)); // a string: raw text (textOnFlush)
      afterSend?.();
    });
  }

  /** A close frame with `code`, after everything queued before it. */
  closeAfterQueue(code: number): void {
    this.enqueue(async () => {
      await this.whileStalled();
      if (this.record.closed) return;
      this.markClosed(code);
      this.ws.close(code);
    });
  }

  private enqueue(step: () => Promise<void> | void): void {
    this.queue = this.queue.then(step).catch(() => undefined);
  }

  private async whileStalled(): Promise<void> {
    while ((this.faults.stall || this.faults.halfOpen) && !this.record.closed) await sleep(20);
  }
}
