// The shell around the pure session machine: it turns socket and upstream callbacks into machine
// events and performs the machine's effects through its collaborators: the client's audio on its way
// upstream (intake.ts), the client's output (client-output.ts), usage figures (usage-tally.ts), named
// timers (timers.ts); what happens to the session is told as lifecycle events (lifecycle.ts), which the
// ledger, metrics and log observe (observers.ts).
import { createReplayBuffer, planAudio } from '../audio/index.js';
import type { UpstreamCredentials } from '../auth/index.js';
import {
  MAX_CLIENT_TEXT_BYTES,
  oversizedText,
  parseClientMessage,
  serverMessages,
  validateConfig,
  type Endpoint,
} from '../protocol/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import type { UpstreamLiveness, UpstreamTarget } from '../upstream/index.js';
import type { SessionLimiter, UsageLedger } from '../usage/index.js';
import { ClientOutput, type ClientSink } from './client-output.js';
import { AudioIntake, type Control } from './intake.js';
import { Lifecycle, type LifecycleListener } from './lifecycle.js';
import { observeSession } from './observers.js';
import { HANDOVER_CLOSE_WAIT_MS, sameConfig, type Restore, type SessionSnapshot } from './resume.js';
import { ClientStream } from './stream.js';
import { systemClock, Timers, type Clock } from './timers.js';
import { UpstreamLink, type LinkOptions, type ReconnectPolicy } from './upstream-link.js';
import { UsageTally } from './usage-tally.js';
import {
  CLOSE,
  forwardsAudio,
  HANDED_OVER_REASON,
  initialState,
  migrating,
  restoredState,
  transition,
  type ConfigVerdict,
  type Effect,
  type Outcome,
  type SessionEvent,
  type SessionState,
} from './machine.js';

export type { ClientSink };

type TimerName = 'config_deadline' | 'time_limit' | 'upstream_answer' | 'resume_grace' | 'handover_wait';

export interface SessionSettings {
  upstreamWsBase: string;
  configTimeoutMs: number;
  streamMaxSeconds: number;
  chunkMs: number;
  pace: number;
  maxBufferedAudioBytes: number;
  /** how long to wait for the upstream's usage + ended once `end` has been sent to it */
  endTimeoutMs: number;
  /** the pings that find a half-open upstream; absent: none */
  upstreamLiveness?: UpstreamLiveness;
  /** how a session gets a new upstream session when its upstream is lost mid-session */
  reconnect: ReconnectPolicy;
  /** how long a dropped client with a resume key may take its session over again */
  resumeGraceSeconds: number;
}

export interface SessionDeps {
  settings: SessionSettings;
  credentials: UpstreamCredentials;
  ledger: UsageLedger;
  limiter: SessionLimiter;
  logger: Logger;
  /** the session's timers run on it (tests give a fake one) */
  clock?: Clock;
  /** the upstream side (tests give a fake one); default: an UpstreamLink to the real service */
  createLink?: (o: LinkOptions) => Link;
}

/** What the session uses of its upstream link. */
export type Link = Pick<
  UpstreamLink,
  | 'open'
  | 'restore'
  | 'offset'
  | 'finalUntil'
  | 'segment'
  | 'resumePoint'
  | 'unit'
  | 'sendAudio'
  | 'sendControl'
  | 'reconnect'
  | 'close'
>;

export interface SessionInfo {
  /** the gateway's own id for this session (ledger, limiter, logs) */
  sessionKey: string;
  endpoint: Endpoint;
  tenant: string;
  interactionId?: string;
  environment?: string;
  clientToken: string;
  /** the client asked for the gateway's notices (query `notices=true`) */
  notices?: boolean;
  /** the client may drop and take the session over again with this key (query `resume=<key>`) */
  resumeKey?: string;
  /** the token's subject: a resume must present the same */
  subject?: string;
}

export class Session {
  readonly key: string;
  private state: SessionState;
  private readonly startedAt = Date.now();
  private configReceivedAt = 0;
  private readonly log: Logger;
  private readonly lifecycle: Lifecycle;
  private readonly timers: Timers<TimerName>;
  private readonly output: ClientOutput;
  private readonly intake: AudioIntake;
  private readonly usage: UsageTally;
  private link?: Link;
  private upstreamSessionId?: string;
  private readonly stream: ClientStream;
  /** the client's validated config and what the first CONFIG_ACCEPTED told it (a resume gets the same) */
  private clientConfig?: unknown;
  private accepted?: { sessionId?: unknown; configuration?: unknown };
  /** the drain hands this session over: resolved with its snapshot once its upstream session ended */
  private handover?: (r: (SessionSnapshot & { missed: string[] }) | undefined) => void;
  /** how far the client's finals cover its stream, as last told (final_delivered) */
  private finalNoted = 0;
  /** A session for the ledger and speech_gateway_active_sessions: from CONFIG_ACCEPTED (or restored
   *  here); a socket that never got there is neither billed nor counted. */
  private live = false;

  /** With `restore`: a session taken over from another replica (its ledger session goes on). */
  constructor(
    private readonly deps: SessionDeps,
    readonly info: SessionInfo,
    client: ClientSink,
    restore?: Restore,
  ) {
    this.key = info.sessionKey;
    this.state = initialState(info.endpoint);
    this.log = deps.logger.child({
      session: this.key,
      tenant: info.tenant,
      endpoint: info.endpoint,
      interaction: info.interactionId,
    });
    this.lifecycle = new Lifecycle((err, e) => {
      metrics.internalErrors.inc({ where: 'session' });
      this.log.error(
        { event: 'lifecycle_listener_failed', on: e.type, err },
        'a lifecycle listener threw; the session goes on',
      );
    });
    observeSession(this.lifecycle, info, deps.ledger, this.log);
    this.timers = new Timers(deps.clock ?? systemClock);
    this.usage = new UsageTally(deps.ledger, this.key);
    this.output = new ClientOutput(client, {
      tooSlow: () =>
        this.guard(() => this.dispatch({ type: 'client_too_slow', details: 'the client is not reading its messages' })),
      heldOverflow: () => this.guard(() => this.dispatch({ type: 'resume_grace' })),
    });
    this.stream = new ClientStream({
      chunkMs: deps.settings.chunkMs,
      pace: deps.settings.pace,
      maxBufferedBytes: deps.settings.maxBufferedAudioBytes,
      log: this.log,
      unit: (unit, kind) => this.link?.unit(unit, kind) ?? unit,
      frame: (frame) => this.onFrame(frame),
      failed: (errorId, details) => this.guard(() => this.dispatch({ type: 'audio_failed', errorId, details })),
    });
    this.intake = new AudioIntake({
      maxBufferedBytes: deps.settings.maxBufferedAudioBytes,
      pipeline: () => this.stream.pipeline,
      over: () => this.over,
      deliver: (audio) => this.onClientAudio(audio),
      sendControl: (message) => this.guard(() => this.sendControl(message)),
      failed: (details) =>
        this.guard(() => this.dispatch({ type: 'audio_failed', errorId: 'AUDIO_MALFORMED', details })),
      tell: (text) => this.output.send(text),
    });
    this.timer('config_deadline', deps.settings.configTimeoutMs, { type: 'config_deadline' });
    if (info.endpoint === 'streams')
      this.timer('time_limit', deps.settings.streamMaxSeconds * 1000, { type: 'time_limit' });
    this.lifecycle.emit({ type: 'opened', restored: restore !== undefined });
    if (restore) this.restoreFrom(restore);
  }

  /** Taken over: the config is the one the first replica validated, audio goes into a pipeline that
   * has parsed the container headers and skips to the next boundary (the client continues its stream
   * without headers), and a new upstream session opens as a reconnection does once audio comes. The
   * client's output waits until its socket sends the config (as for any resume). After a handover the
   * pipeline is also put where the last replica's stopped (mid-Cluster): nothing is skipped. */
  private restoreFrom(r: Restore): void {
    const verdict = this.checkConfig(r.config);
    if (!verdict.ok) throw new Error(`restored config refused: ${verdict.reason}`);
    this.clearTimer('config_deadline');
    this.becomeLive(true);
    this.accepted = r.accepted;
    const resume = r.crash ? r.resume : undefined; // the client resends from there: nothing the finals lack is lost
    this.intake.bytesIn = resume?.audioBytes ?? r.audioBytes;
    this.usage.restore(r.seq, r.credits, r.segment);
    this.finalNoted = r.finalUntil;
    this.output.hold(r.missed);
    this.state = restoredState(this.info.endpoint);
    this.openUpstream(verdict.upstreamConfig, r);
    this.stream.restore(r, this.intake.bytesIn, resume?.mediaReceived ?? r.mediaReceived);
  }

  /** What another replica needs to go on with this session; undefined while it has none to give
   * (not configured yet, no media yet, or a stream only this replica can parse: transcoded, MP3...). */
  snapshot(): SessionSnapshot | undefined {
    const stream = this.stream.handable();
    if (!stream || !this.link) return undefined;
    return {
      config: this.clientConfig,
      accepted: this.accepted,
      ...stream,
      offset: this.link.offset,
      finalUntil: this.link.finalUntil,
      audioBytes: this.intake.bytesIn,
      mediaReceived: this.stream.mediaReceived,
      segment: this.link.segment,
      seq: this.usage.lastSeq,
      credits: this.usage.soFar,
      resume: this.stream.resumePoint(this.link, this.intake.bytesIn),
    };
  }

  /** Hears the session's lifecycle events (see lifecycle.ts), after the ledger, metrics and log. */
  on(listener: LifecycleListener): void {
    this.lifecycle.on(listener);
  }

  /** The drain is about to write this session's 'handing over' record: its keeper writes no more. */
  announceHandover(): void {
    this.guard(() => this.dispatch({ type: 'handover_announced' }));
  }

  /** The drain hands the session to whichever replica its client reconnects to: the client is closed
   * (1012) right after its next audio message (at most HANDOVER_CLOSE_WAIT_MS), audio held for pacing
   * goes upstream at once, then `end`; the upstream's last finals are kept for the client with what
   * it missed. Resolves with the snapshot once the upstream session ended (usage final); undefined
   * when this session cannot be handed over (it drains as before) or it ended here instead (upstream
   * lost, no answer in time). */
  handOver(): Promise<(SessionSnapshot & { missed: string[] }) | undefined> {
    if (!this.snapshot()) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.handover = resolve;
      this.guard(() => this.dispatch({ type: 'handover_started' }));
      if (this.state.migration !== 'handing_over' && this.handover === resolve) this.failHandover();
    });
  }

  /** This session's record names another owner. `sameSession`: another replica took this session
   * over (a resume reached it while this one was taken for dead): its client is closed (4409) and its
   * upstream session ended (`end`: its usage final, recorded), as at a handover; its ledger session and
   * slot are the new owner's. Else another session claimed its key (the claim here had lapsed): this
   * session ends whole, its client told why (RESUME_KEY_IN_USE). */
  disown(sameSession: boolean): void {
    if (this.over) return;
    this.log.warn(
      { event: 'session_disowned', sameSession },
      sameSession
        ? 'another replica took this session over; leaving it'
        : "another session claimed this session's resume key; ending it",
    );
    this.guard(() => this.dispatch({ type: 'disowned', sameSession }));
  }

  /** The drain is handing this session over, or it left (its record is no longer this process's to write). */
  get leaving(): boolean {
    return this.state.migration !== undefined;
  }

  /** The session left this process for another replica (its ledger session and slot go on there). */
  get handedOver(): boolean {
    return this.state.migration === 'left';
  }

  private failHandover(): void {
    const done = this.handover;
    this.handover = undefined;
    done?.(undefined);
  }

  /** Out of this process without ending the ledger session or releasing the slot; a handover under way
   * gets the snapshot, with the output its client has not had. */
  private leave(): void {
    const continuation = this.stream.continuation();
    const snapshot = this.snapshot();
    const missed = this.output.release().map((m) => m.toString());
    this.output.close(CLOSE.serviceRestart, HANDED_OVER_REASON); // handed over while its close waited
    this.timers.clearAll();
    this.link?.close();
    this.stream.pipeline?.close();
    this.lifecycle.emit({
      type: 'handed_over',
      segment: snapshot?.segment ?? 0,
      finalUntil: snapshot?.finalUntil ?? 0,
      missed: missed.length,
      credits: this.usage.total,
      live: this.live,
    });
    this.lifecycle.emit({ type: 'finished' });
    const done = this.handover;
    this.handover = undefined;
    if (done && snapshot) done({ ...snapshot, continuation, missed });
    else done?.(undefined);
  }

  get phase() {
    return this.state.phase;
  }

  private get over(): boolean {
    return this.state.phase === 'closed';
  }

  /** No final usage from the upstream (yet): the ledger has the provisional sum, marked estimated. */
  get usageEstimated(): boolean {
    return this.usage.estimated;
  }

  // ── client side ────────────────────────────────────────────────────────────
  /** `text` is uWS's buffer (valid during its callback): a text over the limit is never decoded. */
  onClientText(text: ArrayBuffer): void {
    try {
      this.intake.flushInbox(); // audio sent before this message goes first
      const parsed =
        text.byteLength > MAX_CLIENT_TEXT_BYTES
          ? oversizedText(text.byteLength)
          : parseClientMessage(Buffer.from(text).toString('utf8'));
      if (!parsed.ok && parsed.tooLarge && this.state.phase === 'awaiting_config') {
        // Only a config can be that large: it is denied, as any config over its bounds is.
        const verdict: ConfigVerdict = {
          ok: false,
          status: 'denied',
          reason: `configuration: ${parsed.error.details}`,
        };
        return this.dispatch({
          type: 'client_message',
          message: { type: 'config', configuration: undefined },
          verdict,
        });
      }
      if (!parsed.ok)
        return this.dispatch({ type: 'client_invalid', errorId: parsed.error.id, details: parsed.error.details });
      const message = parsed.message;
      if (message.type === 'config' && this.state.client === 'resuming')
        return this.onResumeConfig(message.configuration);
      if (message.type === 'config' && this.state.phase === 'awaiting_config') {
        this.configReceivedAt = Date.now();
        return this.dispatch({ type: 'client_message', message, verdict: this.checkConfig(message.configuration) });
      }
      this.dispatch({ type: 'client_message', message });
    } catch (err) {
      this.crash(err);
    }
  }

  /** `frame` is uWS's buffer, valid only during its callback: the inbox copies it. Input bytes are
   * counted as they arrive, across every buffer the session holds, before any transcoding. */
  onClientBinary(frame: ArrayBuffer): void {
    try {
      const overrun = this.state.phase === 'configured' ? this.intake.wouldOverrun(frame.byteLength) : undefined;
      if (overrun) {
        this.intake.drop(); // nothing more of this stream goes upstream; a pending flush/end goes out now
        return this.dispatch({ type: 'audio_failed', errorId: 'AUDIO_BUFFER_OVERRUN', details: overrun });
      }
      this.intake.add(frame);
      if (this.timers.has('handover_wait')) this.dispatch({ type: 'handover_close' });
    } catch (err) {
      this.crash(err);
    }
  }

  /** A piece or batch out of the inbox. The machine's only answer to audio while it flows is
   * `forward_audio`: that phase check is a field read here, not an event and effects per piece. */
  private onClientAudio(audio: Buffer): void {
    try {
      if (forwardsAudio(this.state)) this.intake.forward(audio);
      else this.dispatch({ type: 'client_audio', audio });
    } catch (err) {
      this.crash(err);
    }
  }

  /** `sink` closed: the session's own client (not an older socket it already replaced). */
  onClientClosed(sink: ClientSink): void {
    if (!this.output.closed(sink)) return;
    if (migrating(this.state)) return; // closed for the move: its output is kept already
    this.guard(() => {
      this.intake.flushInbox();
      this.dispatch({
        type: 'client_closed',
        resumable: this.info.resumeKey !== undefined && this.state.migration !== 'key_lost' && !this.output.isSlow,
      });
    });
  }

  /** A socket with this session's resume key takes it over (the gateway checked who it is). Audio it
   * sends before its config continues the stream, after whatever was lost in flight. */
  attach(sink: ClientSink): void {
    this.guard(() => {
      this.output.replace(sink, {
        code: CLOSE.replaced,
        reason: 'replaced by a newer connection with the same resume key',
      });
      this.output.hold(); // the older socket's output, from now on, waits for the new one's config
      this.stream.pipeline?.gap(); // bytes sent just before the drop may never have arrived
      metrics.resumes.inc({ result: 'attached' });
      this.dispatch({ type: 'client_resumed' });
    });
  }

  /** The resuming socket's config: the original one is answered as accepted, with where the audio stands. */
  private onResumeConfig(configuration: unknown): void {
    const v = validateConfig(this.info.endpoint, configuration, {
      isSupportedAudioFormat: (mime) => planAudio(mime).ok,
    });
    if (!v.ok || !sameConfig(v.config, this.clientConfig)) {
      metrics.resumes.inc({ result: 'config_differs' });
      // This socket's own answer: not kept with the output the session keeps for its client.
      this.output.sendNow(
        JSON.stringify(
          serverMessages.configStatus('CONFIG_DENIED', {
            reason: 'configuration differs from the session being resumed',
          }),
        ),
      );
      return this.perform({
        type: 'close_client',
        code: CLOSE.configDenied,
        reason: 'config differs from the resumed session',
      });
    }
    const missed = this.output.release();
    this.output.send(
      JSON.stringify({
        ...serverMessages.configStatus('CONFIG_ACCEPTED'),
        ...this.accepted,
        resumed: true,
        audioBytes: this.intake.bytesIn,
      }),
    );
    for (const message of missed) this.output.send(message);
    this.lifecycle.emit({ type: 'resumed', missed: missed.length, audioBytes: this.intake.bytesIn });
    this.dispatch({ type: 'client_caught_up' });
  }

  /** Graceful end (drain); `abort` when the drain's time is up. */
  shutdown(): void {
    this.guard(() => {
      this.stream.pipeline?.hurry(); // audio held for pacing goes out now, so the end is not cut
      this.dispatch({ type: 'shutdown' });
    });
  }

  abort(): void {
    this.guard(() => this.dispatch({ type: 'drain_deadline' }));
  }

  /** Protocol validation, then the audio plan (which formats pass through, which are transcoded). */
  private checkConfig(configuration: unknown): ConfigVerdict {
    const v = validateConfig(this.info.endpoint, configuration, {
      isSupportedAudioFormat: (mime) => planAudio(mime).ok,
    });
    if (!v.ok) return v;
    this.clientConfig = v.config;
    const declared = (v.config as { audioFormat?: string }).audioFormat;
    const planned = planAudio(declared);
    if (!planned.ok) return { ok: false, status: 'rejected', reason: planned.reason };
    this.stream.plan = planned.plan;
    const upstreamConfig: Record<string, unknown> = { ...(v.config as object) };
    if (planned.plan.upstreamAudioFormat) upstreamConfig.audioFormat = planned.plan.upstreamAudioFormat;
    else delete upstreamConfig.audioFormat;
    return { ok: true, upstreamConfig };
  }

  // ── upstream side ──────────────────────────────────────────────────────────
  private openUpstream(config: unknown, restore?: Restore): void {
    if (!restore)
      this.timer('upstream_answer', this.deps.settings.configTimeoutMs, {
        type: 'upstream_failed',
        errorId: 'UPSTREAM_TIMEOUT',
        details: 'the speech service did not answer the config in time',
      });
    const { settings, credentials } = this.deps;
    this.link = (this.deps.createLink ?? ((o) => new UpstreamLink(o)))({
      endpoint: this.info.endpoint,
      target: () =>
        credentials.tokenFor(this.info.tenant, this.info.clientToken).then((token): UpstreamTarget => ({
          wsBase: settings.upstreamWsBase,
          endpoint: this.info.endpoint,
          interactionId: this.info.interactionId,
          tenant: this.info.tenant,
          token,
          environment: this.info.environment,
        })),
      connectTimeoutMs: settings.configTimeoutMs,
      liveness: settings.upstreamLiveness,
      policy: settings.reconnect,
      createReplay: createReplayBuffer,
      log: this.log,
      handlers: {
        onMessage: (type, data, receivedAt) => this.onUpstreamMessage(type, data, receivedAt),
        onReady: (data, reconnected) =>
          this.guard(() => (reconnected ? this.onReconnected(data) : this.onConfigAccepted(data))),
        onLost: (errorId, details) => this.guard(() => this.dispatch({ type: 'upstream_dropped', errorId, details })),
        onFailed: (errorId, details) => this.guard(() => this.dispatch({ type: 'upstream_failed', errorId, details })),
      },
    });
    if (restore) this.link.restore(config, restore.segment, restore.finalUntil);
    else this.link.open(config);
  }

  /** A text message of the current upstream session, already on the client's timeline. */
  private onUpstreamMessage(type: string | undefined, data: Buffer, receivedAt: number): void {
    try {
      this.upstreamMessage(type, data, receivedAt);
      if (!this.over) this.intake.flushes.relayed(type);
    } catch (err) {
      this.crash(err);
    }
  }

  private upstreamMessage(type: string | undefined, data: Buffer, receivedAt: number): void {
    // This upstream session's final usage is the ledger's; the client's session goes on elsewhere.
    if (migrating(this.state) && type === 'usage') return void this.usage.record(type, data, this.segment);
    switch (type) {
      case 'CONFIG_DENIED':
      case 'CONFIG_REJECTED':
      case 'CONFIG_TIMEOUT':
      case 'CONFIG_NOT_PROVIDED':
      case 'CONFIG_ALREADY_RECEIVED':
      case 'CONFIG_MISSING':
        this.clearTimer('upstream_answer');
        return this.dispatch({ type: 'upstream_config_status', status: type, data });
      case 'delta_usage':
      case 'usage':
        return this.output.relay(this.usage.forClient(type, this.usage.record(type, data, this.segment)), receivedAt);
      case 'ended':
      case 'ENDED':
        this.clearTimer('upstream_answer');
        return this.dispatch({ type: 'upstream_ended', data });
      case 'transcript':
        // A client falling behind loses interim transcripts first, never a final one.
        if (!this.output.relayTranscript(data, receivedAt)) return;
        if (this.link && this.link.finalUntil > this.finalNoted) {
          this.finalNoted = this.link.finalUntil;
          this.lifecycle.emit({ type: 'final_delivered', until: this.finalNoted });
        }
        return;
      default:
        return this.output.relay(data, receivedAt); // facts, commands, flushed, errors: bytes as they came
    }
  }

  /** The first upstream session took the config: audio can flow, and the client is told. */
  private onConfigAccepted(data: Buffer): void {
    this.clearTimer('upstream_answer');
    this.lifecycle.emit({ type: 'config_accepted', latencySeconds: (Date.now() - this.configReceivedAt) / 1000 });
    this.becomeLive(false);
    this.recordUpstreamSession(data);
    this.stream.start();
    this.dispatch({ type: 'upstream_config_status', status: 'CONFIG_ACCEPTED', data });
  }

  /** A new upstream session took over (its replay is sent): the client hears of it only if it asked. */
  private onReconnected(data: Buffer): void {
    this.recordUpstreamSession(data);
    this.stream.pipeline?.discardQueued(); // the replay carried what was waiting to be paced out
    if (this.info.notices)
      this.output.send(
        JSON.stringify(
          serverMessages.notice('UPSTREAM_RECONNECTED', 'the speech service connection was replaced; nothing was lost'),
        ),
      );
    this.dispatch({ type: 'upstream_reconnected' });
  }

  /** The ledger session starts now (a restored one goes on from the replica it started on). */
  private becomeLive(restored: boolean): void {
    this.live = true;
    this.lifecycle.emit({ type: 'live', restored, at: Date.now() });
  }

  /** The tenant's slot is taken once the config is valid, before any upstream session opens: a
   *  config over the cap is refused and costs no upstream session. */
  private openWithSlot(config: unknown): void {
    const { tenant } = this.info;
    this.lifecycle.emit({ type: 'configured' }); // from now on the tenant's cap bounds it
    this.deps.limiter.acquire(tenant, this.key).then(
      (ok) =>
        this.guard(() => {
          if (this.over) return void this.deps.limiter.release(tenant, this.key); // ended while it waited
          if (ok) return this.openUpstream(config);
          metrics.refusals.inc({ reason: 'tenant_limit' });
          this.dispatch({
            type: 'slot_refused',
            details: `tenant "${tenant}" already has MAX_SESSIONS_PER_TENANT concurrent sessions; end one or retry later`,
          });
        }),
      (err: unknown) => this.crash(err),
    );
  }

  private recordUpstreamSession(data: Buffer): void {
    try {
      const accepted = JSON.parse(data.toString('utf8')) as { sessionId?: unknown; configuration?: unknown };
      this.accepted ??= { sessionId: accepted.sessionId, configuration: accepted.configuration };
      const sessionId = accepted.sessionId;
      if (typeof sessionId !== 'string') return;
      this.upstreamSessionId = sessionId;
      this.lifecycle.emit({ type: 'upstream_segment', upstreamSessionId: sessionId, segment: this.segment });
    } catch {
      /* relayed as is; the id is only for records */
    }
  }

  /** A frame out of the pipeline, paced: upstream now. */
  private onFrame(frame: Buffer): void {
    try {
      this.link?.sendAudio(frame);
      this.intake.sent();
    } catch (err) {
      this.crash(err);
    }
  }

  // ── the machine and its effects ────────────────────────────────────────────
  private dispatch(event: SessionEvent): void {
    const { state, effects } = transition(this.state, event);
    this.state = state;
    for (const effect of effects) this.perform(effect);
  }

  private perform(e: Effect): void {
    switch (e.type) {
      case 'send_client':
        return this.output.send(JSON.stringify(e.message));
      case 'relay_client':
        return this.output.relay(e.data);
      case 'close_client':
        return this.output.close(e.code, e.reason);
      case 'open_upstream':
        return this.openWithSlot(e.config);
      case 'forward_audio':
        return this.intake.forward(e.audio);
      case 'flush_upstream':
        return this.intake.flushes.ask();
      case 'end_upstream':
        return this.intake.end();
      case 'close_upstream':
        this.intake.drop();
        this.link?.close();
        return;
      case 'reconnect_upstream':
        this.clearTimer('upstream_answer'); // the link bounds its own attempts
        return this.link?.reconnect();
      case 'clear_timer':
        return this.clearTimer(e.timer);
      case 'hold_output':
        this.output.hold(this.output.undelivered());
        return this.log.info({ event: 'client_detached' }, 'client dropped; waiting for it to resume');
      case 'keep_output':
        return this.output.hold();
      case 'start_handover_wait':
        return this.timers.start('handover_wait', HANDOVER_CLOSE_WAIT_MS, () =>
          this.guard(() => this.dispatch({ type: 'handover_close' })),
        );
      case 'hurry_audio':
        this.timers.clear('handover_wait');
        this.intake.flushInbox();
        return this.stream.pipeline?.hurry();
      case 'tell_client_now':
        return this.output.sendNow(JSON.stringify(e.message));
      case 'give_up_slot':
        return void this.deps.limiter.handOff(this.info.tenant, this.key, 0); // renewed by the new owner now
      case 'fail_handover':
        return this.failHandover();
      case 'leave':
        return this.leave();
      case 'start_resume_grace':
        return this.timer('resume_grace', this.deps.settings.resumeGraceSeconds * 1000, { type: 'resume_grace' });
      case 'finish':
        return this.finish(e.outcome);
    }
  }

  private sendControl(message: Control): void {
    this.link?.sendControl(message); // while reconnecting: after the new upstream session's replay
    if (message.type === 'end' && this.state.phase !== 'reconnecting') {
      this.timer('upstream_answer', this.deps.settings.endTimeoutMs, {
        type: 'upstream_failed',
        errorId: 'UPSTREAM_TIMEOUT',
        details: 'the speech service did not end the session in time',
      });
    }
  }

  /** Runs a callback's work; an exception ends this one session with an error, never the process. */
  private guard(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.crash(err);
    }
  }

  private crash(err: unknown): void {
    this.log.error({ event: 'session_crash', err }, 'session callback threw; ending the session');
    metrics.internalErrors.inc({ where: 'session' });
    try {
      this.dispatch({
        type: 'internal_error',
        details: 'the gateway failed while handling this session; open a new one',
      });
    } catch (again) {
      // The graceful path threw too: close both sides and record the session as it stands.
      this.log.error({ event: 'session_crash', err: again }, 'ending the session failed; closing it');
      this.state = { ...this.state, phase: 'closed', outcome: 'error' };
      try {
        this.perform({ type: 'close_upstream' });
      } catch {
        /* already failing */
      }
      try {
        this.perform({ type: 'close_client', code: 1011, reason: 'internal error' });
      } catch {
        /* already failing */
      }
      this.finish('error');
    }
  }

  private finish(outcome: Outcome): void {
    this.timers.clearAll();
    this.failHandover(); // a handover under way: the session ends here instead
    const at = Date.now();
    this.lifecycle.emit({
      type: 'ended',
      outcome,
      owned: this.state.migration !== 'disowned',
      live: this.live,
      mediaSeconds: this.stream.mediaReceived,
      credits: this.usage.total,
      estimated: this.usage.estimated,
      durationSeconds: (at - this.startedAt) / 1000,
      upstreamSessionId: this.upstreamSessionId,
      stats: this.stream.pipeline?.stats,
      at,
    });
    if (this.state.migration !== 'disowned') void this.deps.limiter.release(this.info.tenant, this.key);
    this.lifecycle.emit({ type: 'finished' });
  }

  /** A named timer that feeds `event` to the machine when it fires. */
  private timer(name: TimerName, ms: number, event: SessionEvent): void {
    this.timers.start(name, ms, () =>
      this.guard(() => {
        if (event.type === 'upstream_failed') metrics.upstreamFailures.inc({ cause: 'timeout' });
        this.dispatch(event);
      }),
    );
  }

  private clearTimer(name: TimerName): void {
    this.timers.clear(name);
  }

  /** The current upstream session's index (0 the first; each reconnection or replica adds one). */
  private get segment(): number {
    return this.link?.segment ?? 0;
  }
}
