// One upstream socket session: the upstream's states (docs/protocol.md, 'Per-connection states'),
// what the client sends, and the fault switches. Its parts: TranscriptSchedule (transcripts, facts
// and commands derived from media time and where it holds speech), MediaTime, the TranscriptGate of
// the transcript faults, UsageMeter, ClientViolations, SessionDeadlines, and the Outbox, one
// ordered queue for everything sent, so delays and stalls never reorder it.
// Close codes: 1000 after `ended`/`ENDED`; 1008 (policy violation) after CONFIG_DENIED,
// CONFIG_REJECTED, CONFIG_TIMEOUT and CONFIG_NOT_PROVIDED (the upstream documents only that the
// session closes and a new connection is required: our choice, docs/protocol.md 'Not documented by
// the service'); faults and dropAllSessions end the TCP stream with no close
// frame, so the client sees 1006; the goingAway switch closes with its own code.
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { UPSTREAM_MAX_FRAME_BYTES } from '../protocol/index.js';
import { checkConfig } from './config-check.js';
import { SessionDeadlines } from './deadlines.js';
import { MediaTime } from './media-time.js';
import { Outbox } from './outbox.js';
import type { SessionRecord } from './session-record.js';
import { sniffContainer } from './sniff.js';
import type { TranscriptFaultBoard } from './transcript-faults.js';
import { TranscriptGate } from './transcript-gate.js';
import { TranscriptSchedule } from './transcript-schedule.js';
import type { FaultSwitches } from './types.js';
import { UsageMeter } from './usage.js';
import { ClientViolations } from './violations.js';

export interface SessionDeps {
  faults: FaultSwitches;
  /** which sessions the transcript faults reach */
  transcriptFaults: TranscriptFaultBoard;
  /** the emulator's log of the most recent violations */
  violations: string[];
  creditsPerSecond: number;
  configTimeoutMs: number;
  streamsMaxAgeMs: number;
  now: () => number;
}

type State = 'opened' | 'configured' | 'refused' | 'ended';

export class UpstreamSession {
  private state: State = 'opened';
  private acceptedSent = false;
  /** made when the config is accepted */
  private transcripts: TranscriptSchedule | null = null;
  private media = new MediaTime();
  private usage: UsageMeter;
  private violations: ClientViolations;
  private deadlines: SessionDeadlines;
  private outbox: Outbox;
  private gate: TranscriptGate;

  constructor(
    private ws: WebSocket,
    readonly record: SessionRecord,
    label: string,
    private deps: SessionDeps,
  ) {
    this.usage = new UsageMeter(deps.creditsPerSecond, deps.faults);
    this.violations = new ClientViolations(deps.violations, label);
    this.gate = new TranscriptGate(record, deps.transcriptFaults.counts);
    this.outbox = new Outbox(ws, record, deps.faults, (code) => this.markClosed(code));
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on('close', (code: number) => this.onClose(code));
    ws.on('error', () => undefined); // an abrupt peer is a normal event here
    this.deadlines = new SessionDeadlines(
      deps.configTimeoutMs,
      () => this.onConfigTimeout(),
      record.endpoint === 'streams' ? deps.streamsMaxAgeMs : undefined,
      () => this.finish(),
    );
  }

  /** The halfOpen switch: stop reading (so pings go unanswered) without closing; false resumes.
   * Output waits meanwhile (see Outbox). */
  setHalfOpen(on: boolean): void {
    if (on) this.ws.pause();
    else this.ws.resume();
  }

  /** The gate of the transcript faults while the session transcribes (its config accepted, not ended). */
  get transcribing(): TranscriptGate | null {
    return this.state === 'configured' && !this.record.closed ? this.gate : null;
  }

  /** The goingAway switch: a close frame with this code, sent at once, nothing queued before it. */
  goAway(code: number): void {
    if (this.record.closed) return;
    this.markClosed(code);
    this.ws.close(code, 'emulator: goingAway');
  }

  /** Ends the socket abruptly, with no close frame (an upstream crash). */
  terminate(code = 1006): void {
    if (this.record.closed) return;
    this.markClosed(code);
    this.ws.terminate();
  }

  private send(msg: unknown, afterSend?: () => void): void {
    this.outbox.send(msg, afterSend);
  }

  // ---- incoming ----

  private onMessage(data: Buffer, isBinary: boolean): void {
    const t = Date.now();
    if (isBinary) {
      this.record.received.push({ t, kind: 'audio', bytes: data.length });
      return this.onAudio(data);
    }
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString('utf8'));
    } catch {
      this.record.received.push({ t, kind: 'other', bytes: data.length });
      this.violations.add('invalid JSON text message');
      return this.send({
        type: 'error',
        error: {
          id: 'INVALID_MESSAGE',
          title: 'Invalid message',
          status: 400,
          details: 'text message is not JSON',
          doc: '',
        },
      });
    }
    const type = (msg as { type?: unknown } | null)?.type;
    const kind = type === 'config' || type === 'flush' || type === 'end' ? type : 'other';
    this.record.received.push({ t, kind });
    if (this.state === 'ended') return this.violations.add(`message after end (${String(type)})`);
    if (this.state === 'refused') return this.violations.add(`message after the config was refused (${String(type)})`);
    if (kind === 'config') return this.onConfig((msg as { configuration?: unknown }).configuration);
    if (kind === 'flush') return this.onFlush();
    if (kind === 'end') return this.finish();
    this.violations.add(`unknown message type ${JSON.stringify(type)}`);
    this.send({
      type: 'error',
      error: {
        id: 'UNKNOWN_MESSAGE_TYPE',
        title: 'Unknown message type',
        status: 400,
        details: `type ${JSON.stringify(type)}`,
        doc: '',
      },
    });
  }

  private onConfig(configuration: unknown): void {
    this.record.configCount++;
    if (this.state !== 'opened') {
      this.violations.add('a second config');
      return this.send({ type: 'CONFIG_ALREADY_RECEIVED', reason: 'a configuration was already received' });
    }
    this.deadlines.configReceived();
    this.record.config = configuration;
    const verdict = this.deps.faults.refuseConfigs
      ? { ok: false as const, type: 'CONFIG_DENIED' as const, reason: 'emulator: refuseConfigs' }
      : checkConfig(this.record.endpoint, configuration);
    this.outbox.wait(this.deps.faults.configDelayMs);
    if (!verdict.ok) {
      this.state = 'refused';
      this.send({ type: verdict.type, reason: verdict.reason });
      return this.outbox.closeAfterQueue(1008);
    }
    this.state = 'configured';
    this.transcripts = new TranscriptSchedule(this.record.endpoint, verdict.resolved, {
      send: (msg) => this.send(msg),
      now: () => this.deps.now(),
      speech: this.media.speech,
      gate: this.gate,
    });
    this.deps.transcriptFaults.join(this.gate);
    const sessionId = randomUUID();
    this.record.sessionId = sessionId;
    this.send(
      { type: 'CONFIG_ACCEPTED', sessionId, configuration: verdict.resolved },
      () => (this.acceptedSent = true),
    );
  }

  private onAudio(frame: Buffer): void {
    const first = this.record.frames.length === 0;
    this.record.addFrame(frame);
    if (frame.length > UPSTREAM_MAX_FRAME_BYTES)
      this.violations.add(`binary frame of ${frame.length} bytes (max ${UPSTREAM_MAX_FRAME_BYTES})`);
    if (first && sniffContainer(frame) === 'unknown') {
      this.violations.add(
        `first binary frame has no recognisable container header (starts ${frame.subarray(0, 8).toString('hex')})`,
      );
    }
    if (this.state === 'ended') return this.violations.once('audio after end');
    if (this.state === 'refused') return this.violations.once('audio after the config was refused');
    if (this.state === 'opened') {
      this.violations.once('audio before config');
      return this.send({ type: 'CONFIG_MISSING', reason: 'audio received before a configuration' });
    }
    if (!this.acceptedSent) this.violations.once('audio before CONFIG_ACCEPTED');
    const { seconds: media, pace } = this.media.add(frame);
    this.record.mediaSeconds = media;
    if (pace) this.violations.add(pace);
    this.gate.reached(media);
    this.transcripts?.mediaReached(media);
    const drop = this.deps.faults.dropAfterMediaSeconds;
    if (drop !== null && media >= drop) this.terminate();
  }

  private onFlush(): void {
    if (this.state === 'opened') return this.violations.add('flush before config');
    if (!this.acceptedSent) this.violations.add('flush before CONFIG_ACCEPTED');
    this.transcripts?.flushUpTo(this.record.mediaSeconds);
    if (this.deps.faults.textOnFlush !== null) this.send(this.deps.faults.textOnFlush);
    this.send({ type: 'flushed' });
    this.send({ type: 'delta_usage', credits: this.usage.delta(this.record.mediaSeconds) });
  }

  /** `end` from the client, or the /streams age limit: remaining output, usage, ended, close. */
  private finish(): void {
    if (this.state === 'ended' || this.state === 'refused' || this.record.closed) return;
    this.state = 'ended';
    this.deadlines.clear();
    this.transcripts?.flushUpTo(this.record.mediaSeconds); // none unless the config was accepted
    this.send({ type: 'usage', credits: this.usage.total(this.record.mediaSeconds) });
    this.send({ type: this.record.endpoint === 'transcribe' ? 'ended' : 'ENDED' });
    this.outbox.closeAfterQueue(1000);
  }

  private onConfigTimeout(): void {
    if (this.state !== 'opened' || this.record.closed) return;
    this.state = 'ended';
    this.send({ type: this.record.endpoint === 'transcribe' ? 'CONFIG_TIMEOUT' : 'CONFIG_NOT_PROVIDED' });
    this.outbox.closeAfterQueue(1008);
  }

  private onClose(code: number): void {
    if (!this.record.closed) this.markClosed(code);
  }

  private markClosed(code: number): void {
    this.record.closeCode = code;
    this.deadlines.clear();
    this.deps.transcriptFaults.leave(this.gate);
  }
}
