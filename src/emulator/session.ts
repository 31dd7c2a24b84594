// One upstream socket session: the upstream's states (docs/protocol.md, 'Per-connection states'),
// transcripts derived from media time, facts, commands, usage, violations of the client, and the
// fault switches. Outgoing messages go through one ordered queue so delays and stalls never reorder
// them.
// Close codes: 1000 after `ended`/`ENDED`; 1008 (policy violation) after CONFIG_DENIED,
// CONFIG_REJECTED, CONFIG_TIMEOUT and CONFIG_NOT_PROVIDED (the upstream documents only that the
// session closes and a new connection is required: our choice, docs/protocol.md 'Not documented by
// the service'); faults and dropAllSessions end the TCP stream with no close
// frame, so the client sees 1006; the goingAway switch closes with its own code.
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { UPSTREAM_MAX_FRAME_BYTES } from '../protocol/index.js';
import { checkConfig } from './config-check.js';
import { nextFactMark } from './fact-schedule.js';
import { createMediaClock, type MediaClock } from './media-clock.js';
import { commandMessage, credits, factsMessage, streamsTranscript, transcribeTranscript } from './messages.js';
import { PacingCheck } from './pacing.js';
import { SessionRecord } from './session-record.js';
import { MAX_LOG_ENTRIES, pushRecent } from './session-window.js';
import { sniffContainer } from './sniff.js';
import type { FaultSwitches } from './types.js';

export interface SessionDeps {
  faults: FaultSwitches;
  /** the emulator's log of the most recent violations */
  violations: string[];
  creditsPerSecond: number;
  configTimeoutMs: number;
  streamsMaxAgeMs: number;
  now: () => number;
}

type State = 'opened' | 'configured' | 'refused' | 'ended';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const EPSILON = 1e-6;

export class UpstreamSession {
  private state: State = 'opened';
  private acceptedSent = false;
  private resolved: Record<string, unknown> = {};
  private clock: MediaClock | null = null;
  private pacing = new PacingCheck();
  private emittedUntil = 0;
  private segments = 0;
  private lastInterimAt = 0;
  private commandSent = false;
  private factsMode = false;
  private nextFact = Infinity;
  private facts = 0;
  private deltaCredited = 0;
  private outbox: Promise<void> = Promise.resolve();
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private ws: WebSocket,
    readonly record: SessionRecord,
    private label: string,
    private deps: SessionDeps,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on('close', (code: number) => this.onClose(code));
    ws.on('error', () => undefined); // an abrupt peer is a normal event here
    this.timers.push(setTimeout(() => this.onConfigTimeout(), deps.configTimeoutMs));
    if (record.endpoint === 'streams') this.timers.push(setTimeout(() => this.finish(), deps.streamsMaxAgeMs));
  }

  /** The halfOpen switch: stop reading (so pings go unanswered) without closing; false resumes.
   * Output waits meanwhile (see whileStalled). */
  setHalfOpen(on: boolean): void {
    if (on) this.ws.pause();
    else this.ws.resume();
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

  private reported = new Set<string>();

  private violation(text: string): void {
    pushRecent(this.deps.violations, `${this.label}: ${text}`, MAX_LOG_ENTRIES);
  }

  /** For rules a client breaks on every frame once it breaks them at all: one entry per session. */
  private violationOnce(text: string): void {
    if (this.reported.has(text)) return;
    this.reported.add(text);
    this.violation(text);
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
      this.violation('invalid JSON text message');
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
    if (this.state === 'ended') return this.violation(`message after end (${String(type)})`);
    if (this.state === 'refused') return this.violation(`message after the config was refused (${String(type)})`);
    if (kind === 'config') return this.onConfig((msg as { configuration?: unknown }).configuration);
    if (kind === 'flush') return this.onFlush();
    if (kind === 'end') return this.finish();
    this.violation(`unknown message type ${JSON.stringify(type)}`);
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
      this.violation('a second config');
      return this.send({ type: 'CONFIG_ALREADY_RECEIVED', reason: 'a configuration was already received' });
    }
    clearTimeout(this.timers[0]);
    this.record.config = configuration;
    const verdict = this.deps.faults.refuseConfigs
      ? { ok: false as const, type: 'CONFIG_DENIED' as const, reason: 'emulator: refuseConfigs' }
      : checkConfig(this.record.endpoint, configuration);
    this.wait(this.deps.faults.configDelayMs);
    if (!verdict.ok) {
      this.state = 'refused';
      this.send({ type: verdict.type, reason: verdict.reason });
      return this.closeAfterQueue(1008);
    }
    this.state = 'configured';
    this.resolved = verdict.resolved;
    const mode = verdict.resolved.mode as { type?: string; factGenerationInterval?: string } | undefined;
    this.factsMode = this.record.endpoint === 'streams' && mode?.type === 'facts';
    if (this.factsMode) this.nextFact = nextFactMark(mode?.factGenerationInterval, 0);
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
      this.violation(`binary frame of ${frame.length} bytes (max ${UPSTREAM_MAX_FRAME_BYTES})`);
    if (first && sniffContainer(frame) === 'unknown') {
      this.violation(
        `first binary frame has no recognisable container header (starts ${frame.subarray(0, 8).toString('hex')})`,
      );
    }
    if (this.state === 'ended') return this.violationOnce('audio after end');
    if (this.state === 'refused') return this.violationOnce('audio after the config was refused');
    if (this.state === 'opened') {
      this.violationOnce('audio before config');
      return this.send({ type: 'CONFIG_MISSING', reason: 'audio received before a configuration' });
    }
    if (!this.acceptedSent) this.violationOnce('audio before CONFIG_ACCEPTED');
    this.clock ??= createMediaClock(frame);
    const media = this.clock.add(frame);
    this.record.mediaSeconds = media;
    const pace = this.pacing.record(media, Date.now());
    if (pace) this.violation(pace);
    this.emitWholeSeconds(media);
    if (this.record.endpoint === 'transcribe' && this.resolved.interimResults === true) this.emitInterim(media);
    const drop = this.deps.faults.dropAfterMediaSeconds;
    if (drop !== null && media >= drop) this.terminate();
  }

  private onFlush(): void {
    if (this.state === 'opened') return this.violation('flush before config');
    if (!this.acceptedSent) this.violation('flush before CONFIG_ACCEPTED');
    this.emitRemainder();
    if (this.factsMode) this.emitFact();
    if (this.deps.faults.textOnFlush !== null) this.send(this.deps.faults.textOnFlush);
    this.send({ type: 'flushed' });
    const total = credits(this.record.mediaSeconds, this.deps.creditsPerSecond);
    this.send({
      type: 'delta_usage',
      credits: this.deps.faults.usageCredits ?? Math.round((total - this.deltaCredited) * 10_000) / 10_000,
    });
    this.deltaCredited = total;
  }

  /** `end` from the client, or the /streams age limit: remaining output, usage, ended, close. */
  private finish(): void {
    if (this.state === 'ended' || this.state === 'refused' || this.record.closed) return;
    const configured = this.state === 'configured';
    this.state = 'ended';
    this.clearTimers();
    if (configured) {
      this.emitRemainder();
      if (this.factsMode) this.emitFact();
    }
    this.send({
      type: 'usage',
      credits: this.deps.faults.usageCredits ?? credits(this.record.mediaSeconds, this.deps.creditsPerSecond),
    });
    this.send({ type: this.record.endpoint === 'transcribe' ? 'ended' : 'ENDED' });
    this.closeAfterQueue(1000);
  }

  private onConfigTimeout(): void {
    if (this.state !== 'opened' || this.record.closed) return;
    this.state = 'ended';
    this.send({ type: this.record.endpoint === 'transcribe' ? 'CONFIG_TIMEOUT' : 'CONFIG_NOT_PROVIDED' });
    this.closeAfterQueue(1008);
  }

  private onClose(code: number): void {
    if (!this.record.closed) this.markClosed(code);
  }

  private markClosed(code: number): void {
    this.record.closed = true;
    this.record.closeCode = code;
    this.clearTimers();
  }

  private clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
  }

  // ---- output derived from media time ----

  private segment(start: number, end: number): void {
    const n = this.segments++;
    const msg =
      this.record.endpoint === 'transcribe'
        ? transcribeTranscript(n, start, end, true)
        : streamsTranscript(
            n,
            start,
            end,
            (this.resolved.transcription as { diarize?: boolean } | undefined)?.diarize === true,
          );
    this.send(msg);
    this.emittedUntil = end;
    this.maybeCommand(start, end);
    while (this.factsMode && end >= this.nextFact) {
      this.emitFact();
      this.nextFact = nextFactMark(
        (this.resolved.mode as { factGenerationInterval?: string }).factGenerationInterval,
        this.nextFact,
      );
    }
  }

  private emitWholeSeconds(media: number): void {
    for (let next = Math.floor(this.emittedUntil + EPSILON) + 1; media + EPSILON >= next; next++) {
      this.segment(this.emittedUntil, next);
    }
  }

  private emitRemainder(): void {
    if (this.record.mediaSeconds > this.emittedUntil + EPSILON)
      this.segment(this.emittedUntil, this.record.mediaSeconds);
  }

  private emitInterim(media: number): void {
    if (media <= this.emittedUntil + EPSILON || media - this.lastInterimAt < 0.25) return;
    this.lastInterimAt = media;
    this.send(transcribeTranscript(this.segments, this.emittedUntil, media, false));
  }

  /** The first declared command, once, in the segment that reaches the 5-second mark. */
  private maybeCommand(start: number, end: number): void {
    if (this.commandSent || this.record.endpoint !== 'transcribe' || end + EPSILON < 5) return;
    const first = (this.resolved.commands as Array<{ id?: unknown; phrases?: unknown }> | undefined)?.[0];
    if (!first || typeof first.id !== 'string') return;
    this.commandSent = true;
    const phrase = Array.isArray(first.phrases) && typeof first.phrases[0] === 'string' ? first.phrases[0] : first.id;
    this.send(commandMessage(first.id, phrase, start, end));
  }

  private emitFact(): void {
    this.facts++;
    this.send(factsMessage(this.facts, this.emittedUntil, this.deps.now()));
  }

  // ---- ordered output queue ----

  private enqueue(step: () => Promise<void> | void): void {
    this.outbox = this.outbox.then(step).catch(() => undefined);
  }

  private wait(ms: number): void {
    if (ms > 0) this.enqueue(() => sleep(ms));
  }

  private async whileStalled(): Promise<void> {
    while ((this.deps.faults.stall || this.deps.faults.halfOpen) && !this.record.closed) await sleep(20);
  }

  /** messageDelayMs acts like network latency: each message leaves that long after it was made. */
  private send(msg: unknown, afterSend?: () => void): void {
    const due = Date.now() + this.deps.faults.messageDelayMs;
    const pad = this.deps.faults.padTranscriptBytes;
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

  private closeAfterQueue(code: number): void {
    this.enqueue(async () => {
      await this.whileStalled();
      if (this.record.closed) return;
      this.markClosed(code);
      this.ws.close(code);
    });
  }
}
