// The session's side of the upstream: one upstream session at a time, and a new one when it is
// lost mid-session. A new upstream session gets the same config, then the replay: the container's
// initialization data and the audio no final transcript covers yet, its timestamps starting at 0;
// every time it reports is moved by the replay's offset and finals the client already has are
// dropped, so the client sees one timeline (src/protocol/timeline.ts). Audio and flush/end wait
// while no upstream session is ready, in their order. The reconnection budget covers an incident:
// losses within UPSTREAM_HEALTHY_MS of a replacement's start are one incident, so an upstream that
// accepts and drops again and again runs the budget out; and the audio replayed over the whole
// session is bounded (MAX_REPLAY_FACTOR), so a flapping upstream cannot multiply the traffic.
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
import {
  connectUpstream,
  UpstreamError,
  type UpstreamConnection,
  type UpstreamLiveness,
  type UpstreamTarget,
} from '../upstream/index.js';

/** A client's words for an upstream socket that failed for a cause only the log gets. */
const FAILED = 'the connection to the speech service failed';

/** An upstream session that stays up this long ends the incident: the next loss has the whole budget
 *  again. Time, not a final transcript: a healthy upstream hears silence without finals. */
export const UPSTREAM_HEALTHY_MS = 10_000;
/** Audio replayed over a session, at most this many times the audio that went upstream once. */
export const MAX_REPLAY_FACTOR = 4;
/** flush/end waiting for a ready upstream session: the session has at most two flushes and one end
 *  out at a time, so more is a bug, not a client's doing. */
const MAX_WAITING_CONTROLS = 3;

/** Backoff before reconnection attempt `attempt` (0-based): 0.2 s doubled, at most 5 s, with equal
 *  jitter (half the step fixed, half random) so sessions that lost one upstream together do not
 *  reconnect together. */
export function reconnectDelay(attempt: number, random: () => number = Math.random): number {
  const step = Math.min(5000, 200 * 2 ** attempt);
  return step / 2 + random() * (step / 2);
}

export interface ReconnectPolicy {
  /** attempts after a loss before the session gives up */
  attempts: number;
  /** time after a loss before the session gives up, however many attempts are left */
  maxSeconds: number;
  /** per-session bound on audio kept for a replay */
  replayBytes: number;
}

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
  private readonly waiting: Control[] = [];
  private endSentTo?: UpstreamConnection;
  private replay?: ReplayBuffer;
  private readonly timeline: Timeline;
  private lostAt = 0;
  /** the incident's first loss, and its attempts and replacements (reset once one stayed up) */
  private incidentAt = 0;
  private attempt = 0;
  private replaced = 0;
  /** when the current upstream session became ready */
  private readyAt = 0;
  /** bytes that went upstream once (the pipeline's units), and bytes replayed over the session */
  private unitBytes = 0;
  private replayedBytes = 0;
  /** flushes sent to the current upstream session and not answered (sent again after a loss) */
  private flushesOut = 0;
  private retryTimer?: NodeJS.Timeout;
  private lastLoss: { errorId: ErrorId; details: string } = { errorId: 'UPSTREAM_CLOSED', details: '' };
  /** the loss that started the current reconnection (what the client is told if it fails) */
  private cause = this.lastLoss;
  private closed = false;
  /** taken over from another replica: the upstream session opens with the first media (restore) */
  private deferred = false;

  constructor(private readonly o: LinkOptions) {
    this.timeline = createTimeline(o.endpoint);
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

  /** Where the replay's oldest group starts in the parser's input (see ReplayBuffer.resumePoint). */
  resumePoint(): { at: number; behind: number } | undefined {
    return this.replay?.resumePoint();
  }

  /** Upstream-bound units as the pipeline makes them: the replay keeps what no final covers yet;
   *  returns the unit as it goes upstream (after a replay, retimed to continue the replayed stream). */
  unit(u: Unit, kind: ReplayKind): Unit {
    this.replay ??= this.o.createReplay(kind, { maxBytes: this.o.policy.replayBytes });
    this.unitBytes += u.bytes.length;
    const out = this.replay.add(u);
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
    if (!this.ready) {
      if (message.type === 'end' && this.waiting.some((m) => m.type === 'end')) return;
      if (this.waiting.length >= MAX_WAITING_CONTROLS)
        throw new Error(`more than ${MAX_WAITING_CONTROLS} flush/end messages waiting for the upstream`);
      this.waiting.push(message);
      if (this.deferred) this.openDeferred();
      return;
    }
    if (message.type === 'end') {
      if (this.endSentTo === this.conn) return; // this upstream session already has its end
      this.endSentTo = this.conn;
    } else this.flushesOut++;
    this.conn?.sendJson(message);
  }

  /** After a loss mid-session: new upstream sessions, with backoff, until one takes or time is up. */
  reconnect(): void {
    this.lostAt = Date.now();
    if (this.incidentAt === 0 || this.lostAt - this.readyAt >= UPSTREAM_HEALTHY_MS) this.newIncident();
    metrics.upstreamReconnects.inc({ cause: this.lastLoss.errorId.toLowerCase() });
    this.retry();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.ready = false;
    this.conn?.close(1000, 'session over');
    this.conn = undefined;
  }

  private openDeferred(): void {
    this.deferred = false;
    this.lostAt = Date.now();
    this.newIncident();
    this.connect();
  }

  private newIncident(): void {
    this.incidentAt = this.lostAt;
    this.attempt = 0;
    this.replaced = 0;
    this.cause = this.lastLoss;
  }

  private retry(): void {
    const { attempts, maxSeconds } = this.o.policy;
    const spent = (Date.now() - this.incidentAt) / 1000;
    if (this.attempt >= attempts || spent >= maxSeconds) {
      metrics.upstreamReconnectResults.inc({ result: 'failed' });
      const tries = `${this.attempt} attempts in ${spent.toFixed(1)} s`;
      if (this.replaced > 0) {
        // It was replaced, and lost again before it had stayed up: the connection is flapping.
        return this.o.handlers.onFailed(
          'UPSTREAM_UNSTABLE',
          `the speech service connection was lost again ${this.replaced} times within ${UPSTREAM_HEALTHY_MS / 1000} s of being replaced (${tries})`,
        );
      }
      const { errorId, details } = this.cause;
      const last = this.attempt > 0 ? ` (last: ${this.lastLoss.details})` : '';
      return this.o.handlers.onFailed(errorId, `${details}; reconnecting failed after ${tries}${last}`);
    }
    this.retryTimer = setTimeout(() => this.connect(), reconnectDelay(this.attempt++));
    this.retryTimer.unref?.();
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
    this.lastLoss = { errorId, details };
    this.o.log.warn(
      { event: 'upstream_lost', errorId, cause, wasReady, reconnecting: this.lostAt > 0 },
      'upstream connection lost or not made',
    );
    if (this.lostAt > 0 && !wasReady) return this.retry(); // a reconnection attempt failed
    if (!wasReady) return this.o.handlers.onFailed(errorId, details); // the first connection failed
    this.o.handlers.onLost(errorId, details);
  }

  private onMessage(data: Buffer): void {
    const receivedAt = performance.now();
    const type = upstreamMessageType(data);
    if (!this.ready && type === 'CONFIG_ACCEPTED') return this.accepted(data);
    if (type === 'flushed' && this.flushesOut > 0) this.flushesOut--;
    if (!this.ready && this.lostAt > 0) {
      // A new upstream session that refuses the config the first one took: give up.
      this.o.log.warn({ event: 'reconnect_refused', type }, 'the new upstream session refused the config');
      this.lastLoss = {
        errorId: 'UPSTREAM_CLOSED',
        details: `the speech service answered ${type ?? 'an unknown message'} on reconnection`,
      };
      this.conn?.close(1000, 'refused');
      this.conn = undefined;
      return this.retry();
    }
    if (type === undefined) return this.unreadable(data);
    const mapped = this.timeline.map(type, data);
    if (this.replay && type === 'transcript') this.replay.release(this.timeline.finalUntil);
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
    const reconnected = this.lostAt > 0;
    if (reconnected) {
      this.replay?.release(this.timeline.finalUntil); // a restored session's replay starts at its client's last final
      if (this.replayedBytes + (this.replay?.bufferedBytes ?? 0) > MAX_REPLAY_FACTOR * this.unitBytes)
        return this.replayBudgetSpent();
      this.segment++;
      const replay = this.replay?.replay() ?? { frames: [], offset: this.timeline.finalUntil, bytes: 0 };
      this.replayedBytes += replay.bytes;
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
          attempts: this.attempt,
          replayedBytes: replay.bytes,
          offset: replay.offset,
        },
        'upstream session replaced',
      );
      this.lostAt = 0;
      this.replaced++;
    }
    this.ready = true;
    this.readyAt = Date.now();
    this.o.handlers.onReady(data, reconnected);
    // Flushes the lost upstream session did not answer go again, first: they were asked first.
    const unanswered: Control[] = Array.from({ length: this.flushesOut }, () => ({ type: 'flush' }));
    this.flushesOut = 0;
    for (const message of [...unanswered, ...this.waiting.splice(0)]) this.sendControl(message);
  }

  /** Replaying once more would put the session's replayed audio over its bound: the session ends. */
  private replayBudgetSpent(): void {
    metrics.upstreamReconnectResults.inc({ result: 'failed' });
    this.o.log.warn(
      { event: 'replay_budget_spent', replayedBytes: this.replayedBytes, unitBytes: this.unitBytes },
      'replayed audio over its bound; ending the session',
    );
    this.conn?.close(1000, 'replay budget spent');
    this.conn = undefined;
    this.o.handlers.onFailed(
      'UPSTREAM_UNSTABLE',
      `the speech service connection kept failing: ${this.replayedBytes} bytes of audio were replayed to it already, and another replay would exceed ${MAX_REPLAY_FACTOR} times the audio sent`,
    );
  }
}
