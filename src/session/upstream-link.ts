// The session's side of the upstream: one upstream session at a time, and a new one when it is
// lost mid-session. A new upstream session gets the same config, then the replay: the container's
// initialization data and the audio no final transcript covers yet, its timestamps starting at 0;
// every time it reports is moved by the replay's offset and finals the client already has are
// dropped, so the client sees one timeline (src/protocol/timeline.ts). Audio and flush/end wait
// while no upstream session is ready, in their order. Its parts: the reconnection budget
// (upstream-link-reconnect.ts), the audio kept for a replay and its bound (upstream-link-replay.ts),
// and the flush/end messages held or unanswered (upstream-link-controls.ts).
import type { ReplayBuffer, ReplayKind, Unit } from '../audio/index.js';
import {
  createTimeline,
  upstreamMessageType,
  UPSTREAM_MAX_FRAME_BYTES,
  type Endpoint,
  type ErrorId,
  type Timeline,
} from '../protocol/index.js';
import { errorMessage } from '../protocol/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import type { Control } from './intake.js';
import { PendingControls } from './upstream-link-controls.js';
import { Reconnects, type Loss, type ReconnectPolicy } from './upstream-link-reconnect.js';
import { ReplayKeeper } from './upstream-link-replay.js';
import {
  connectUpstream,
  UpstreamError,
  type UpstreamConnection,
  type UpstreamLiveness,
  type UpstreamTarget,
} from '../upstream/index.js';

export { reconnectDelay, type ReconnectPolicy } from './upstream-link-reconnect.js';

/** A client's words for an upstream socket that failed for a cause only the log gets. */
const FAILED = 'the connection to the speech service failed';

export interface LinkHandlers {
  /** A text message of the current upstream session, on the client's timeline (CONFIG_* of a
   *  reconnection are handled here and not passed on). */
  onMessage(type: string | undefined, data: Buffer, receivedAt: number): void;
  /** The first upstream session, or a new one, accepted the config and had its replay. */
  onReady(data: Buffer, reconnected: boolean): void;
  /** The upstream session was lost mid-session (the session decides whether to reconnect). */
  onLost(errorId: ErrorId, details: string): void;
  /** No upstream session could be had (first connection, or every reconnection attempt). */
  onFailed(errorId: ErrorId, details: string): void;
  /** A final goes to the client spanning [start, end] of its stream. */
  onFinal?(start: number, end: number): void;
  /** Where the finals the client has been given end (less than finalUntil while output waits for
   *  it): the audio after it stays in the replay, where a successor after a crash resends from. */
  given?(): number;
}

export interface LinkOptions {
  endpoint: Endpoint;
  target(): Promise<UpstreamTarget>;
  connectTimeoutMs: number;
  liveness?: UpstreamLiveness;
  policy: ReconnectPolicy;
  /** the replay buffer for a stream of this container kind */
  createReplay(kind: ReplayKind, o: { maxBytes: number }): ReplayBuffer;
  log: Logger;
  handlers: LinkHandlers;
}

export class UpstreamLink {
  /** 0 for the first upstream session, then one more per reconnection (the ledger's segment). */
  segment = 0;
  private conn?: UpstreamConnection;
  private ready = false;
  private config: unknown;
  private readonly timeline: Timeline;
  private readonly reconnects: Reconnects;
  private readonly replay: ReplayKeeper;
  private readonly controls = new PendingControls();
  private closed = false;
  /** taken over from another replica: the upstream session opens with the first media (restore) */
  private deferred = false;

  constructor(private readonly o: LinkOptions) {
    this.timeline = createTimeline(o.endpoint, (start, end) => o.handlers.onFinal?.(start, end));
    this.reconnects = new Reconnects(o.policy);
    this.replay = new ReplayKeeper({ createReplay: o.createReplay, maxBytes: o.policy.replayBytes });
  }

  /** The first upstream session. */
  open(config: unknown): void {
    this.config = config;
    this.connect();
  }

  /** A session another replica handed over (or lost): upstream segments go on after `segment`, the
   *  client has every final up to `finalUntil`. The upstream session opens when media past that comes
   *  (or a flush/end), as a reconnection: its replay (the init data, then the client's audio from the
   *  packet that holds `finalUntil`, retimed to start at 0) puts the new stream on the client's timeline. */
  restore(config: unknown, segment: number, finalUntil: number): void {
    this.config = config;
    this.segment = segment;
    this.timeline.restore(finalUntil);
    this.deferred = true;
  }

  get offset(): number {
    return this.timeline.offset;
  }

  get finalUntil(): number {
    return this.timeline.finalUntil;
  }

  /** Bytes of audio kept for a replay now. */
  get replayBytes(): number {
    return this.replay.heldBytes;
  }

  /** Where the replay's oldest group starts in the parser's input (see ReplayBuffer.resumePoint). */
  resumePoint(): { at: number; behind: number } | undefined {
    return this.replay.resumePoint();
  }

  /** Upstream-bound units as the pipeline makes them: the replay keeps what no final covers yet;
   *  returns the unit as it goes upstream (after a replay, retimed to continue the replayed stream). */
  unit(u: Unit, kind: ReplayKind): Unit {
    const out = this.replay.unit(u, kind);
    // Media past the client's last final (not a restored Cluster's head, nor audio it resent that the
    // finals cover): the replay can start at the packet that holds that final's end.
    if (this.deferred && u.end !== undefined && u.end > this.timeline.finalUntil) this.openDeferred();
    return out;
  }

  sendAudio(frame: Buffer): boolean {
    if (!this.ready) return false; // a reconnection's replay carries it
    this.conn?.send(frame);
    return true;
  }

  /** flush/end: now, or after the replay of the next upstream session. */
  sendControl(message: Control): void {
    if (this.ready) return this.controls.send(message, this.conn);
    if (this.controls.hold(message) && this.deferred) this.openDeferred();
  }

  /** A restored session's upstream session opens now, without waiting for media (none may come). */
  openRestored(): void {
    if (this.deferred) this.openDeferred();
  }

  /** After a loss mid-session: new upstream sessions, with backoff, until one takes or time is up. */
  reconnect(): void {
    this.reconnects.begin();
    metrics.upstreamReconnects.inc({ cause: this.reconnects.lastLoss.errorId.toLowerCase() });
    this.retry();
  }

  /** The upstream session answers but has stopped transcribing: it is dropped as a lost one (a new
   *  upstream session, the replay from the last final, within the same reconnection budget). */
  stalled(details: string): void {
    const conn = this.conn;
    if (!conn || !this.ready || this.closed) return;
    metrics.upstreamFailures.inc({ cause: 'stalled' });
    this.reconnects.stalled();
    conn.close(1000, 'stalled');
    this.gone(conn, 'UPSTREAM_UNAVAILABLE', details, 'stalled: no transcript for the speech sent');
  }

  close(): void {
    this.closed = true;
    this.reconnects.cancel();
    this.ready = false;
    this.conn?.close(1000, 'session over');
    this.conn = undefined;
  }

  private openDeferred(): void {
    this.deferred = false;
    this.reconnects.begin(true);
    this.connect();
  }

  private retry(): void {
    const failure = this.reconnects.next(() => this.connect());
    if (!failure) return;
    metrics.upstreamReconnectResults.inc({ result: 'failed' });
    this.o.handlers.onFailed(failure.errorId, failure.details);
  }

  private connect(): void {
    const started = Date.now();
    this.o.target().then(
      (target) => {
        if (this.closed) return;
        const conn: UpstreamConnection = connectUpstream(
          target,
          {
            onOpen: () => {
              metrics.upstreamConnectLatency.observe({ endpoint: this.o.endpoint }, (Date.now() - started) / 1000);
              conn.sendJson({ type: 'config', configuration: this.config });
            },
            onMessage: (data, isBinary) => {
              if (conn === this.conn && !isBinary) this.onMessage(data);
            },
            onClose: (code) =>
              this.gone(conn, 'UPSTREAM_CLOSED', `the speech service closed the connection (code ${code})`),
            onError: (err) =>
              this.gone(conn, 'UPSTREAM_UNAVAILABLE', err instanceof UpstreamError ? err.told : FAILED, err.message),
          },
          { connectTimeoutMs: this.o.connectTimeoutMs, liveness: this.o.liveness },
        );
        this.conn = conn;
      },
      (err: Error) =>
        this.gone(
          undefined,
          'UPSTREAM_UNAVAILABLE',
          'the gateway could not obtain credentials for the speech service',
          `upstream credentials: ${err.message}`,
        ),
    );
  }

  /** `details` is what the client may be told; `cause` (an address, a network or credentials error) only the log. */
  private gone(conn: UpstreamConnection | undefined, errorId: ErrorId, details: string, cause = details): void {
    if (this.closed || (conn && conn !== this.conn)) return; // an old connection's last word
    this.conn = undefined;
    const wasReady = this.ready;
    this.ready = false;
    this.reconnects.lost({ errorId, details });
    const reconnecting = this.reconnects.reconnecting;
    this.o.log.warn(
      { event: 'upstream_lost', errorId, cause, wasReady, reconnecting },
      'upstream connection lost or not made',
    );
    if (reconnecting && !wasReady) return this.retry(); // a reconnection attempt failed
    if (!wasReady) return this.o.handlers.onFailed(errorId, details); // the first connection failed
    this.o.handlers.onLost(errorId, details);
  }

  private onMessage(data: Buffer): void {
    const receivedAt = performance.now();
    const type = upstreamMessageType(data);
    if (!this.ready && type === 'CONFIG_ACCEPTED') return this.accepted(data);
    if (type === 'flushed') this.controls.flushed();
    if (!this.ready && this.reconnects.reconnecting) {
      // A new upstream session that refuses the config the first one took: give up.
      this.o.log.warn({ event: 'reconnect_refused', type }, 'the new upstream session refused the config');
      const loss: Loss = {
        errorId: 'UPSTREAM_CLOSED',
        details: `the speech service answered ${type ?? 'an unknown message'} on reconnection`,
      };
      this.reconnects.lost(loss);
      this.conn?.close(1000, 'refused');
      this.conn = undefined;
      return this.retry();
    }
    if (type === undefined) return this.unreadable(data);
    const mapped = this.timeline.map(type, data);
    if (type === 'transcript') {
      this.reconnects.transcribed();
      this.replay.release(Math.min(this.timeline.finalUntil, this.o.handlers.given?.() ?? Infinity));
    }
    if (mapped) this.o.handlers.onMessage(type, mapped, receivedAt);
  }

  /** Text that is not a JSON message with a `type`: not passed on; the client gets the catalogue's error. */
  private unreadable(data: Buffer): void {
    this.o.log.warn(
      { event: 'upstream_message_invalid', bytes: data.length },
      'the speech service sent text that is not a JSON message; not relayed',
    );
    const error = errorMessage(
      'UPSTREAM_MESSAGE_INVALID',
      'the speech service sent a message that is not JSON; it was not passed on',
    );
    this.o.handlers.onMessage('error', Buffer.from(JSON.stringify(error)), performance.now());
  }

  private accepted(data: Buffer): void {
    const reconnected = this.reconnects.reconnecting;
    if (reconnected) {
      // A restored session's replay starts at its client's last final.
      const replay = this.replay.take(this.timeline.finalUntil);
      if (!replay) return this.replayBudgetSpent();
      this.segment++;
      this.timeline.offset = replay.offset;
      for (const frame of replay.frames) {
        // A single unit over the frame limit comes alone: cut it as the re-chunker would.
        for (let off = 0; off < frame.length; off += UPSTREAM_MAX_FRAME_BYTES)
          this.conn?.send(frame.subarray(off, off + UPSTREAM_MAX_FRAME_BYTES));
      }
      metrics.upstreamReplayedBytes.inc(replay.bytes);
      metrics.upstreamReconnectResults.inc({ result: 'ok' });
      this.o.log.info(
        {
          event: 'upstream_reconnected',
          segment: this.segment,
          attempts: this.reconnects.attempts,
          replayedBytes: replay.bytes,
          offset: replay.offset,
        },
        'upstream session replaced',
      );
    }
    this.reconnects.ready(reconnected);
    this.ready = true;
    this.o.handlers.onReady(data, reconnected);
    for (const message of this.controls.takeAll()) this.sendControl(message);
  }

  /** Replaying once more would put the session's replayed audio over its bound: the session ends. */
  private replayBudgetSpent(): void {
    metrics.upstreamReconnectResults.inc({ result: 'failed' });
    const { replayedBytes, unitBytes, details } = this.replay.spent();
    this.o.log.warn(
      { event: 'replay_budget_spent', replayedBytes, unitBytes },
      'replayed audio over its bound; ending the session',
    );
    this.conn?.close(1000, 'replay budget spent');
    this.conn = undefined;
    this.o.handlers.onFailed('UPSTREAM_UNSTABLE', details);
  }
}
