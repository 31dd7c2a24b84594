// The shell around the pure session machine (machine.ts): it turns socket and upstream callbacks into
// machine events and performs the machine's effects through collaborators with one job each (parts.ts):
// the client's audio on its way upstream (intake.ts), the client's output (client-output.ts), usage
// (usage-tally.ts), named timers (timers.ts), the upstream side (upstream-side.ts) and the move between
// replicas (migration.ts). What happens to the session is told as lifecycle events (lifecycle.ts).
import { readClientText } from './client-input.js';
import type { ClientSink } from './client-output.js';
import { answerResumeConfig, attachClient } from './client-resume.js';
import { SessionConfig } from './config.js';
import { MachineDriver } from './driver.js';
import { performEffect } from './effects.js';
import type { LifecycleListener } from './lifecycle.js';
import {
  forwardsAudio,
  initialState,
  migrating,
  restoredState,
  type Effect,
  type Outcome,
  type SessionEvent,
} from './machine.js';
import { Migration, type HandedOver } from './migration.js';
import { assemble } from './parts.js';
import type { Restore, SessionSnapshot } from './resume.js';
import type { Parts, SessionDeps, SessionInfo } from './types.js';
import { UpstreamSide } from './upstream-side.js';

export class Session {
  readonly key: string;
  private readonly startedAt = Date.now();
  private readonly p: Parts;
  private readonly config: SessionConfig;
  private readonly upstream: UpstreamSide;
  private readonly migration: Migration;
  private readonly driver: MachineDriver;
  /** A session for the ledger and speech_gateway_active_sessions: from CONFIG_ACCEPTED (or restored
   *  here); a socket that never got there is neither billed nor counted. */
  private live = false;

  /** With `restore`: a session taken over from another replica (its ledger session goes on). */
  constructor(deps: SessionDeps, info: SessionInfo, client: ClientSink, restore?: Restore) {
    this.key = info.sessionKey;
    this.driver = new MachineDriver(restore ? restoredState(info.endpoint) : initialState(info.endpoint), {
      parts: () => this.p,
      perform: (e) => this.perform(e),
      finish: (outcome) => this.finish(outcome),
    });
    this.p = assemble(deps, info, client, {
      driver: this.driver,
      unit: (unit, kind) => this.upstream.link?.unit(unit, kind) ?? unit,
      frame: (frame) => this.upstream.sendFrame(frame),
      deliver: (audio) => this.onClientAudio(audio),
      sendControl: (message) => this.upstream.sendControl(message),
      given: () => this.upstream.given(),
    });
    this.config = new SessionConfig(info.endpoint);
    this.upstream = new UpstreamSide(this.p, this.config, this.driver, () => this.becomeLive(false));
    this.migration = new Migration(this.p, this.config, this.upstream, this.driver);
    this.driver.timer('config_deadline', deps.settings.configTimeoutMs, { type: 'config_deadline' });
    this.p.lifecycle.emit({ type: 'opened', restored: restore !== undefined });
    if (restore) this.migration.restore(restore, () => this.becomeLive(true));
  }

  get info(): SessionInfo {
    return this.p.info;
  }

  get phase() {
    return this.driver.state.phase;
  }

  /** No final usage from the upstream (yet): the ledger has the provisional sum, marked estimated. */
  get usageEstimated(): boolean {
    return this.p.usage.estimated;
  }

  /** Hears the session's lifecycle events (see lifecycle.ts), after the ledger, metrics and log. */
  on(listener: LifecycleListener): void {
    this.p.lifecycle.on(listener);
  }

  // ── moving between replicas ────────────────────────────────────────────────
  /** What another replica needs to go on with this session, once it has something to give. */
  snapshot(): SessionSnapshot | undefined {
    return this.migration.snapshot();
  }

  /** The drain is about to write this session's 'handing over' record: its keeper writes no more. */
  announceHandover(): void {
    this.driver.guard(() => this.driver.dispatch({ type: 'handover_announced' }));
  }

  /** The drain hands the session to whichever replica its client reconnects to: the client is closed
   * (1012) right after its next audio message (at most HANDOVER_CLOSE_WAIT_MS), audio held for pacing
   * goes upstream at once, then `end`; the upstream's last finals are kept for the client with what
   * it missed. Resolves with the snapshot once the upstream session ended (usage final); undefined
   * when this session cannot be handed over (it drains as before) or it ended here instead. */
  handOver(): Promise<HandedOver | undefined> {
    return this.migration.handOver();
  }

  /** This session's record names another owner. `sameSession`: another replica took this session
   * over (its client is closed 4409 and its upstream session ended, as at a handover; its ledger
   * session and slot are the new owner's). Else another session claimed its key: this one ends whole. */
  disown(sameSession: boolean): void {
    if (this.driver.state.phase === 'closed') return;
    const why = sameSession
      ? 'another replica took this session over; leaving it'
      : "another session claimed this session's resume key; ending it";
    this.p.log.warn({ event: 'session_disowned', sameSession }, why);
    this.driver.guard(() => this.driver.dispatch({ type: 'disowned', sameSession }));
  }

  /** The drain is handing this session over, or it left (its record is no longer this process's to write). */
  get leaving(): boolean {
    return this.driver.state.migration !== undefined;
  }

  /** Bytes of audio kept for a replay (what no final covers yet). */
  get replayBytes(): number {
    return this.upstream.link?.replayBytes ?? 0;
  }

  /** The session left this process for another replica (its ledger session and slot go on there). */
  get handedOver(): boolean {
    return this.driver.state.migration === 'left';
  }

  // ── client side ────────────────────────────────────────────────────────────
  onClientText(text: ArrayBuffer): void {
    try {
      this.p.intake.flushInbox(); // audio sent before this message goes first
      const read = readClientText(text, this.driver.state);
      if (read.kind === 'resume_config')
        return answerResumeConfig(this.p, this.config, this.driver, read.configuration);
      const event = read.kind === 'event' ? read.event : this.configMessage(read.configuration);
      if (event.type === 'client_message' && event.verdict?.ok === false)
        this.p.lifecycle.emit({ type: 'refused', reason: `config_${event.verdict.status}` });
      this.driver.dispatch(event);
    } catch (err) {
      this.driver.crash(err);
    }
  }

  /** The session's first config, checked once (its audio plan kept for the stream). */
  private configMessage(configuration: unknown): SessionEvent {
    this.config.receivedAt = Date.now();
    const { verdict, plan } = this.config.check(configuration);
    if (plan) this.p.stream.plan = plan;
    return { type: 'client_message', message: { type: 'config', configuration }, verdict };
  }

  /** `frame` is uWS's buffer, valid only during its callback: the inbox copies it. Input bytes are
   * counted as they arrive, across every buffer the session holds, before any transcoding. */
  onClientBinary(frame: ArrayBuffer): void {
    try {
      const { intake, timers } = this.p;
      const overrun = this.driver.state.phase === 'configured' ? intake.wouldOverrun(frame.byteLength) : undefined;
      if (overrun) {
        intake.drop(); // nothing more of this stream goes upstream; a pending flush/end goes out now
        return this.driver.dispatch({ type: 'audio_failed', errorId: 'AUDIO_BUFFER_OVERRUN', details: overrun });
      }
      intake.add(frame);
      // The 1012 leaves once the other frames of this read are taken too: a client back from a
      // reconnection sends what it queued at once, and frames behind a close are lost.
      if (timers.has('handover_wait')) this.driver.timer('handover_wait', 0, { type: 'handover_close' });
    } catch (err) {
      this.driver.crash(err);
    }
  }

  /** A piece or batch out of the inbox. The machine's only answer to audio while it flows is
   * `forward_audio`: that phase check is a field read here, not an event and effects per piece. */
  private onClientAudio(audio: Buffer): void {
    try {
      if (forwardsAudio(this.driver.state)) this.p.intake.forward(audio);
      else this.driver.dispatch({ type: 'client_audio', audio });
    } catch (err) {
      this.driver.crash(err);
    }
  }

  /** `sink` closed: the session's own client (not an older socket it already replaced). */
  onClientClosed(sink: ClientSink): void {
    if (!this.p.output.closed(sink)) return;
    if (migrating(this.driver.state)) return; // closed for the move: its output is kept already
    this.driver.guard(() => {
      this.p.intake.flushInbox();
      const resumable = this.info.resumeKey !== undefined && this.driver.state.migration !== 'key_lost';
      this.driver.dispatch({ type: 'client_closed', resumable: resumable && !this.p.output.isSlow });
    });
  }

  /** A socket with this session's resume key takes it over (the gateway checked who it is). */
  attach(sink: ClientSink): void {
    this.driver.guard(() => attachClient(this.p, this.driver, sink));
  }

  /** Graceful end (drain); `abort` when the drain's time is up. */
  shutdown(): void {
    this.driver.guard(() => {
      this.p.stream.pipeline?.hurry(); // audio held for pacing goes out now, so the end is not cut
      this.driver.dispatch({ type: 'shutdown' });
    });
  }

  abort(): void {
    this.driver.guard(() => this.driver.dispatch({ type: 'drain_deadline' }));
  }

  // ── the machine's effects ──────────────────────────────────────────────────
  private perform(e: Effect): void {
    performEffect(e, {
      ...this.p,
      upstream: this.upstream,
      driver: this.driver,
      leave: () => this.migration.leave(this.live),
      failHandover: () => this.migration.fail(),
      finish: (outcome) => this.finish(outcome),
    });
  }

  /** The ledger session starts now (a restored one goes on from the replica it started on). */
  private becomeLive(restored: boolean): void {
    this.live = true;
    // STREAM_MAX_SECONDS counts from the first CONFIG_ACCEPTED, wherever the session has been since
    // (a record of the release before has no time: from here).
    const since = (this.config.acceptedAt ??= Date.now());
    const limitMs = this.p.deps.settings.streamMaxSeconds * 1000;
    if (this.p.info.endpoint === 'streams')
      this.driver.timer('time_limit', Math.max(0, limitMs - (Date.now() - since)), { type: 'time_limit' });
    this.p.lifecycle.emit({ type: 'live', restored, at: Date.now() });
  }

  private finish(outcome: Outcome): void {
    const { timers, lifecycle, stream, usage, deps, info } = this.p;
    timers.clearAll();
    this.migration.fail(); // a handover under way: the session ends here instead
    const at = Date.now();
    const owned = this.driver.state.migration !== 'disowned';
    lifecycle.emit({
      type: 'ended',
      outcome,
      owned,
      live: this.live,
      mediaSeconds: stream.mediaReceived,
      credits: usage.total,
      estimated: usage.estimated,
      durationSeconds: (at - this.startedAt) / 1000,
      upstreamSessionId: this.upstream.upstreamSessionId,
      stats: stream.pipeline?.stats,
      coverage: this.live ? this.p.speech.figures() : undefined,
      at,
    });
    if (owned) void deps.limiter.release(info.tenant, this.key);
    lifecycle.emit({ type: 'finished' });
  }
}
