// The shell around the pure session machine: it turns socket callbacks into machine events and
// performs the machine's effects with the real upstream socket, audio pipeline, timers, ledger
// and metrics. Decisions live in machine.ts; this file only carries them out.
import { createAudioPipeline, createReplayBuffer, planAudio, type AudioPipeline, type AudioPlan } from '../audio/index.js';
import type { UpstreamCredentials } from '../auth/index.js';
import { errorMessage, MAX_CLIENT_TEXT_BYTES, oversizedText, parseClientMessage, serverMessages, validateConfig, type Endpoint } from '../protocol/index.js';
import { metrics, tenantLabel, type Logger } from '../telemetry/index.js';
import type { UpstreamLiveness, UpstreamTarget } from '../upstream/index.js';
import type { SessionLimiter, UsageLedger } from '../usage/index.js';
import { FlushGate, MAX_UNANSWERED_FLUSHES } from './flushes.js';
import { AudioInbox } from './inbox.js';
import { HANDED_OVER_REASON, HANDOVER_CLOSE_WAIT_MS, MAX_INIT_BYTES, MissedOutput, sameConfig, type Restore, type SessionSnapshot } from './resume.js';
import { UpstreamLink, type ReconnectPolicy } from './upstream-link.js';
import { SessionCredits } from './usage-figures.js';
import { CLOSE, forwardsAudio, initialState, transition, type ConfigVerdict, type Effect, type Outcome, type SessionEvent, type SessionState } from './machine.js';

/** What the server hands a session to talk to its client socket. */
export interface ClientSink {
  /** false: the client is not reading (the message was dropped, or its backlog is over the bound). */
  sendText(text: string | Buffer): boolean;
  /** Bytes sent to the client and not yet taken by it. */
  backlog(): number;
  close(code: number, reason: string): void;
  /** Once closed: what it took and its client is known not to have got (through the internal hop). */
  undelivered(): Array<string | Buffer>;
}

/** Past this much unread output, interim transcripts are dropped (finals, facts, usage never are). */
const SHED_BACKLOG_BYTES = 64 * 1024;

const FINAL_FALSE = /"(?:isFinal|final)"\s*:\s*false/;
const FINAL_TRUE = /"(?:isFinal|final)"\s*:\s*true/;

/** An upstream transcript message carrying interim results only (`isFinal` on /transcribe, `final` on
 * /streams, false throughout): the only messages a slow client can do without. Only asked while
 * the client is behind, so the decode is off the normal path. */
function isInterimOnly(data: Buffer): boolean {
  const text = data.toString('latin1');
  return FINAL_FALSE.test(text) && !FINAL_TRUE.test(text);
}

type Control = { type: 'flush' | 'end' };

/** Held audio pieces smaller than this are joined: a client alternating tiny audio and text frames
 * cannot make the held queue one object per byte. */
const JOIN_BELOW_BYTES = 1024;
/** The held queue yields to the event loop after this many pieces, so no client stalls the process. */
const YIELD_EVERY = 256;

// The per-message latency histogram's two children, taken once (no labels looked up per message).
const CLIENT_TO_UPSTREAM = metrics.forwardLatency.labels('client_to_upstream');
const UPSTREAM_TO_CLIENT = metrics.forwardLatency.labels('upstream_to_client');

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
}

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
  private link?: UpstreamLink;
  private upstreamSessionId?: string;
  private plan?: AudioPlan;
  private pipeline?: AudioPipeline;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Audio and flush/end in the client's order while a flush/end waits for the pipeline to drain
   * what came before it: what follows waits for it to be sent. */
  private ordered: Array<Buffer | Control> = [];
  private orderedBytes = 0;
  private ordering = false;
  /** client flushes coalesced: at most one pending upstream, each still answered */
  private readonly flushes = new FlushGate({
    sendUpstream: () => this.sendControlAfterDrain({ type: 'flush' }),
    answer: () => {
      this.sendClient('{"type":"flushed"}');
      this.sendClient('{"type":"delta_usage","credits":0}');
    },
    refuse: () => this.sendClient(JSON.stringify(errorMessage('TOO_MANY_FLUSHES',
      `${MAX_UNANSWERED_FLUSHES} flushes are waiting for the speech service's answer; flushes are refused until it comes`))),
  });
  private readonly inbox = new AudioInbox((audio) => this.onClientAudio(audio));
  private clientSlow = false;
  /** while a resumable client is away: what it misses */
  private missed?: MissedOutput;
  /** the client's validated config and what the first CONFIG_ACCEPTED told it (a resume gets the same) */
  private clientConfig?: unknown;
  private accepted?: { sessionId?: unknown; configuration?: unknown };
  /** a socket took the session over and has not sent its config yet */
  private resumePending = false;
  /** audio bytes received from the client, over every socket of the session */
  private audioBytesIn = 0;
  private usageSeq = 0;
  /** the socket's own truth (the machine's clientConnected says what it intends) */
  private clientOpen = true;
  /** arrival time of the oldest client audio not yet sent upstream (re-chunking + pacing delay) */
  private oldestUnsentAudioAt?: number;
  private finalCredits?: number;
  private deltaCredits = 0;
  /** the session's usage over every upstream session and replica: what its client is told */
  private credits = new SessionCredits();
  /** the parser's input byte n is the client's byte n + clientBytesBase, from clientBytesFrom on (a
   *  restored parser reads the record's headers and continuation first) */
  private clientBytesBase = 0;
  private clientBytesFrom = 0;
  private readonly log: Logger;
  /** the client's container headers as they went upstream (another replica parses the rest with them) */
  private init: Buffer[] = [];
  private initBytes = 0;
  /** media seconds received by the replicas this session was on before this one */
  private mediaBefore = 0;
  /** the drain hands this session over: resolved with its snapshot once its upstream session ended */
  private handover?: (r: (SessionSnapshot & { missed: string[] }) | undefined) => void;
  /** the handover waits for the client's next audio message to close it (HANDOVER_CLOSE_WAIT_MS) */
  private handoverClose?: NodeJS.Timeout;
  /** taken over after a crash: the client's finals end here; the restored stream's first media
   *  after it is what the dead owner lost (counted once) */
  private lossFrom?: number;
  /** the drain is handing this session over (its record is no longer the owner's to refresh) */
  leaving = false;
  /** the session left this process for another replica (its ledger session and slot go on there) */
  handedOver = false;
  /** another replica took this session over: its ledger session and slot are not this process's to end */
  private disowned = false;
  /** another session has this session's resume key: its client cannot come back to it */
  private keyLost = false;
  /** a final transcript reached the client (the session record notes how far the client has finals) */
  onFinal?: () => void;
  private finalNoted = 0;
  onFinished?: (s: Session) => void;
  /** A valid config arrived: the server stops counting the socket as unconfigured. */
  onConfigured?: () => void;
  /** A session for the ledger and speech_gateway_active_sessions: from CONFIG_ACCEPTED (or restored
   *  here); a socket that never got there is neither billed nor counted. */
  private live = false;

  /** With `restore`: a session taken over from another replica (its ledger session goes on). */
  constructor(
    private readonly deps: SessionDeps,
    readonly info: SessionInfo,
    private client: ClientSink,
    restore?: Restore,
  ) {
    this.key = info.sessionKey;
    this.state = initialState(info.endpoint);
    this.log = deps.logger.child({ session: this.key, tenant: info.tenant, endpoint: info.endpoint, interaction: info.interactionId });
    this.timer('config_deadline', deps.settings.configTimeoutMs, { type: 'config_deadline' });
    if (info.endpoint === 'streams') this.timer('time_limit', deps.settings.streamMaxSeconds * 1000, { type: 'time_limit' });
    this.log.info({ event: 'session_start', restored: restore !== undefined }, 'session started');
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
    this.usageSeq = r.seq;
    const resume = r.crash ? r.resume : undefined; // the client resends from there: nothing the finals lack is lost
    this.audioBytesIn = resume?.audioBytes ?? r.audioBytes;
    this.mediaBefore = resume?.mediaReceived ?? r.mediaReceived;
    this.credits = new SessionCredits(r.credits, r.segment);
    this.clientBytesFrom = this.audioBytesIn;
    this.clientBytesBase = this.audioBytesIn - r.init.length - (r.continuation?.bytes.length ?? 0);
    this.finalNoted = r.finalUntil;
    this.missed = new MissedOutput();
    for (const m of r.missed) this.missed.push(m);
    this.resumePending = true;
    this.state = { ...this.state, phase: 'reconnecting', resume: 'configured' };
    this.openUpstream(verdict.upstreamConfig, r);
    this.startPipeline();
    this.pipeline!.push(r.init);
    if (r.continuation) this.pipeline!.push(r.continuation.bytes);
    this.pipeline!.gap(r.continuation?.expect); // verifies that the client's bytes do continue; skips to a boundary if not
    if (r.crash) this.lossFrom = r.finalUntil;
  }

  /** What another replica needs to go on with this session; undefined while it has none to give
   * (not configured yet, no media yet, or a stream only this replica can parse: transcoded, MP3...). */
  snapshot(): SessionSnapshot | undefined {
    const source = this.pipeline?.stats.source;
    const kind = source?.startsWith('webm-') ? 'webm' : source?.startsWith('ogg-') ? 'ogg' : undefined;
    if (!kind || source === 'webm-pcm' || !this.link || this.initBytes === 0 || this.initBytes > MAX_INIT_BYTES) return undefined;
    return {
      config: this.clientConfig, accepted: this.accepted, kind, init: Buffer.concat(this.init),
      offset: this.link.offset, finalUntil: this.link.finalUntil, audioBytes: this.audioBytesIn,
      mediaReceived: this.mediaBefore + (this.pipeline?.stats.mediaSecondsIn ?? 0), segment: this.link.segment, seq: this.usageSeq,
      credits: this.credits.soFar, resume: this.resumePoint(),
    };
  }

  /** See SessionSnapshot.resume: where the replay's oldest Cluster or page starts in the client's stream. */
  private resumePoint(): SessionSnapshot['resume'] {
    const p = this.link?.resumePoint();
    if (!p) return undefined;
    const audioBytes = this.clientBytesBase + p.at;
    if (audioBytes < this.clientBytesFrom || audioBytes > this.audioBytesIn) return undefined;
    const media = this.mediaBefore + (this.pipeline?.stats.mediaSecondsIn ?? 0);
    return { audioBytes, mediaReceived: Math.max(this.mediaBefore, media - p.behind) };
  }

  /** The drain hands the session to whichever replica its client reconnects to: the client is closed
   * (1012) right after its next audio message (at most HANDOVER_CLOSE_WAIT_MS), audio held for pacing
   * goes upstream at once, then `end`; the upstream's last finals are kept for the client with what
   * it missed. Resolves with the snapshot once the upstream session ended (usage final); undefined
   * when this session cannot be handed over (it drains as before) or it ended here instead (upstream
   * lost, no answer in time). */
  handOver(): Promise<(SessionSnapshot & { missed: string[] }) | undefined> {
    const { phase } = this.state;
    if ((phase !== 'configured' && phase !== 'reconnecting') || !this.snapshot()) return Promise.resolve(undefined);
    this.leaving = true;
    return new Promise((resolve) => {
      this.handover = resolve;
      this.missed ??= new MissedOutput(); // output from now on is kept for the successor
      if (this.clientOpen) this.handoverClose = setTimeout(() => this.guard(() => this.endForHandover()), HANDOVER_CLOSE_WAIT_MS);
      else this.guard(() => this.endForHandover());
    });
  }

  /** The client is closed (no more audio comes here), then the upstream session ends. */
  private endForHandover(): void {
    clearTimeout(this.handoverClose);
    this.handoverClose = undefined;
    if (this.clientOpen) {
      this.clientOpen = false;
      this.client.close(CLOSE.serviceRestart, HANDED_OVER_REASON);
    }
    this.inbox.flush();
    this.pipeline?.hurry();
    this.dispatch({ type: 'shutdown' });
  }

  /** The upstream session ended for the handover: the session leaves this process without ending its
   * ledger session or releasing its slot. */
  private handedOverNow(): void {
    const done = this.handover!;
    const continuation = this.pipeline?.continuation();
    const snapshot = { ...this.snapshot()!, continuation: continuation && continuation.bytes.length <= MAX_INIT_BYTES ? continuation : undefined };
    const missed = (this.missed?.take() ?? []).map((m) => m.toString());
    this.handover = undefined;
    const credits = this.finalCredits ?? this.deltaCredits;
    if (credits > 0) metrics.credits.inc({ tenant: tenantLabel(this.info.tenant), endpoint: this.info.endpoint }, credits);
    this.log.info({ event: 'session_handed_over', segment: snapshot.segment, finalUntil: snapshot.finalUntil, missed: missed.length }, 'session handed over');
    this.leave();
    done({ ...snapshot, missed });
  }

  /** This session's record names another owner. `sameSession`: another replica took this session
   * over (a resume reached it while this one was taken for dead): its client is closed (4409) and its
   * upstream session ended (`end`: its usage final, recorded), as at a handover; its ledger session and
   * slot are the new owner's. Else another session claimed its key (the claim here had lapsed): this
   * session ends whole, its client told why (RESUME_KEY_IN_USE). */
  disown(sameSession: boolean): void {
    if (this.over || this.disowned) return;
    this.log.warn({ event: 'session_disowned', sameSession }, sameSession ? 'another replica took this session over; leaving it' : 'another session claimed this session\'s resume key; ending it');
    this.leaving = true; // its record is not this process's to write any more
    if (!sameSession) return this.lostKey();
    this.disowned = true;
    if (this.clientOpen) {
      this.clientOpen = false;
      this.client.close(CLOSE.replaced, 'taken over by another gateway replica');
    }
    void this.deps.limiter.handOff(this.info.tenant, this.key, 0); // renewed by the new owner now
    const { phase } = this.state;
    if (phase !== 'configured' && phase !== 'reconnecting' && phase !== 'ending') return this.leave();
    this.handover ??= () => undefined; // the upstream's `ended` takes it out of this process (handedOverNow)
    this.missed ??= new MissedOutput(); // its output has no client here any more
    this.endForHandover();
  }

  /** The resume key is another session's now: the client is told, the session ends (usage final). */
  private lostKey(): void {
    this.keyLost = true;
    if (this.clientOpen) {
      this.sendNow(JSON.stringify(errorMessage('RESUME_KEY_IN_USE', 'another session took this resume key; this session has ended: open a new one with a new key')));
      this.clientOpen = false;
      this.client.close(CLOSE.replaced, 'resume key taken by another session');
    }
    this.handover?.(undefined); // a handover under way: the session ends here instead
    this.handover = undefined;
    this.dispatch({ type: 'client_closed' });
  }

  /** Out of this process without ending the ledger session or releasing the slot. */
  private leave(): void {
    clearTimeout(this.handoverClose);
    if (this.clientOpen) this.client.close(CLOSE.serviceRestart, HANDED_OVER_REASON); // handed over while its close waited
    this.clientOpen = false;
    this.handedOver = true;
    this.leaving = true;
    this.state = { ...this.state, phase: 'closed' };
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.link?.close();
    this.pipeline?.close();
    if (this.live) metrics.activeSessions.dec({ endpoint: this.info.endpoint, tenant: tenantLabel(this.info.tenant) });
    this.onFinished?.(this);
  }

  get phase() {
    return this.state.phase;
  }

  private get over(): boolean {
    return this.state.phase === 'closed';
  }

  /** No final usage from the upstream (yet): the ledger has the provisional sum, marked estimated. */
  get usageEstimated(): boolean {
    return this.finalCredits === undefined;
  }

  // ── client side ────────────────────────────────────────────────────────────
  /** `text` is uWS's buffer (valid during its callback): a text over the limit is never decoded. */
  onClientText(text: ArrayBuffer): void {
    try {
      this.inbox.flush(); // audio sent before this message goes first
      const parsed = text.byteLength > MAX_CLIENT_TEXT_BYTES
        ? oversizedText(text.byteLength)
        : parseClientMessage(Buffer.from(text).toString('utf8'));
      if (!parsed.ok && parsed.tooLarge && this.state.phase === 'awaiting_config') {
        // Only a config can be that large: it is denied, as any config over its bounds is.
        const verdict: ConfigVerdict = { ok: false, status: 'denied', reason: `configuration: ${parsed.error.details}` };
        return this.dispatch({ type: 'client_message', message: { type: 'config', configuration: undefined }, verdict });
      }
      if (!parsed.ok) return this.dispatch({ type: 'client_invalid', errorId: parsed.error.id, details: parsed.error.details });
      const message = parsed.message;
      if (message.type === 'config' && this.resumePending) return this.onResumeConfig(message.configuration);
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
      const max = this.deps.settings.maxBufferedAudioBytes;
      if (this.state.phase === 'configured' && this.bufferedInputBytes + frame.byteLength > max) {
        this.dropAudio(); // nothing more of this stream goes upstream; a pending flush/end goes out now
        return this.dispatch({ type: 'audio_failed', errorId: 'AUDIO_BUFFER_OVERRUN', details: `more than ${max} bytes of audio waiting to be forwarded; send audio at real time` });
      }
      this.audioBytesIn += frame.byteLength;
      this.inbox.add(frame);
      if (this.handoverClose) this.endForHandover();
    } catch (err) {
      this.crash(err);
    }
  }

  /** A piece or batch out of the inbox. The machine's only answer to audio while it flows is
   * `forward_audio`: that phase check is a field read here, not an event and effects per piece. */
  private onClientAudio(audio: Buffer): void {
    try {
      if (forwardsAudio(this.state)) this.forwardAudio(audio);
      else this.dispatch({ type: 'client_audio', audio });
    } catch (err) {
      this.crash(err);
    }
  }

  /** `sink` closed: the session's own client (not an older socket it already replaced). */
  onClientClosed(sink: ClientSink): void {
    if (sink !== this.client) return;
    this.clientOpen = false;
    if (this.handover) return; // closed by the handover: its output is kept already
    this.guard(() => {
      this.inbox.flush();
      const { phase } = this.state;
      const mayResume = this.info.resumeKey !== undefined && !this.clientSlow && !this.keyLost && (phase === 'configured' || phase === 'reconnecting' || phase === 'ending');
      if (!mayResume) return this.dispatch({ type: 'client_closed' });
      this.missed = new MissedOutput();
      for (const message of sink.undelivered()) this.keepForResume(message);
      this.log.info({ event: 'client_detached' }, 'client dropped; waiting for it to resume');
      this.dispatch({ type: 'client_detached' });
    });
  }

  /** A socket with this session's resume key takes it over (the gateway checked who it is). Audio it
   * sends before its config continues the stream, after whatever was lost in flight. */
  attach(sink: ClientSink): void {
    this.guard(() => {
      const older = this.client;
      this.client = sink;
      if (this.clientOpen) older.close(CLOSE.replaced, 'replaced by a newer connection with the same resume key');
      this.clientOpen = true;
      this.clientSlow = false;
      this.resumePending = true;
      this.missed ??= new MissedOutput(); // the older socket's output, from now on, waits for the new one's config
      this.pipeline?.gap(); // bytes sent just before the drop may never have arrived
      metrics.resumes.inc({ result: 'attached' });
      this.dispatch({ type: 'client_resumed' });
    });
  }

  /** The resuming socket's config: the original one is answered as accepted, with where the audio stands. */
  private onResumeConfig(configuration: unknown): void {
    const v = validateConfig(this.info.endpoint, configuration, { isSupportedAudioFormat: (mime) => planAudio(mime).ok });
    if (!v.ok || !sameConfig(v.config, this.clientConfig)) {
      metrics.resumes.inc({ result: 'config_differs' });
      // This socket's own answer: not kept with the output the session keeps for its client.
      this.sendNow(JSON.stringify(serverMessages.configStatus('CONFIG_DENIED', { reason: 'configuration differs from the session being resumed' })));
      return this.perform({ type: 'close_client', code: CLOSE.configDenied, reason: 'config differs from the resumed session' });
    }
    this.resumePending = false;
    const missed = this.missed?.take() ?? [];
    this.missed = undefined;
    this.sendClient(JSON.stringify({ ...serverMessages.configStatus('CONFIG_ACCEPTED'), ...this.accepted, resumed: true, audioBytes: this.audioBytesIn }));
    for (const message of missed) this.sendClient(message);
    metrics.resumes.inc({ result: 'resumed' });
    this.log.info({ event: 'client_resumed', missed: missed.length, audioBytes: this.audioBytesIn }, 'client resumed its session');
    this.dispatch({ type: 'client_caught_up' });
  }

  /** Graceful end (drain); `abort` when the drain's time is up. */
  shutdown(): void {
    this.guard(() => {
      this.pipeline?.hurry(); // audio held for pacing goes out now, so the end is not cut
      this.dispatch({ type: 'shutdown' });
    });
  }

  abort(): void {
    this.guard(() => this.dispatch({ type: 'drain_deadline' }));
  }

  /** Client audio received and not yet sent upstream: batched, held behind a flush/end, in the pipeline. */
  private get bufferedInputBytes(): number {
    return this.inbox.bufferedBytes + this.orderedBytes + (this.pipeline?.bufferedBytes ?? 0);
  }


  /** Protocol validation, then the audio plan (which formats pass through, which are transcoded). */
  private checkConfig(configuration: unknown): ConfigVerdict {
    const v = validateConfig(this.info.endpoint, configuration, { isSupportedAudioFormat: (mime) => planAudio(mime).ok });
    if (!v.ok) return v;
    this.clientConfig = v.config;
    const declared = (v.config as { audioFormat?: string }).audioFormat;
    const planned = planAudio(declared);
    if (!planned.ok) return { ok: false, status: 'rejected', reason: planned.reason };
    this.plan = planned.plan;
    const upstreamConfig: Record<string, unknown> = { ...(v.config as object) };
    if (planned.plan.upstreamAudioFormat) upstreamConfig.audioFormat = planned.plan.upstreamAudioFormat;
    else delete upstreamConfig.audioFormat;
    return { ok: true, upstreamConfig };
  }

  // ── upstream side ──────────────────────────────────────────────────────────
  private openUpstream(config: unknown, restore?: Restore): void {
    if (!restore) this.timer('upstream_answer', this.deps.settings.configTimeoutMs, {
      type: 'upstream_failed', errorId: 'UPSTREAM_TIMEOUT', details: 'the speech service did not answer the config in time',
    });
    const { settings, credentials } = this.deps;
    this.link = new UpstreamLink({
      endpoint: this.info.endpoint,
      target: () => credentials.tokenFor(this.info.tenant, this.info.clientToken).then((token): UpstreamTarget => ({
        wsBase: settings.upstreamWsBase, endpoint: this.info.endpoint, interactionId: this.info.interactionId,
        tenant: this.info.tenant, token, environment: this.info.environment,
      })),
      connectTimeoutMs: settings.configTimeoutMs,
      liveness: settings.upstreamLiveness,
      policy: settings.reconnect,
      createReplay: createReplayBuffer,
      log: this.log,
      handlers: {
        onMessage: (type, data) => this.onUpstreamMessage(type, data),
        onReady: (data, reconnected) => this.guard(() => (reconnected ? this.onReconnected(data) : this.onConfigAccepted(data))),
        onLost: (errorId, details) => this.guard(() => this.dispatch({ type: 'upstream_dropped', errorId, details })),
        onFailed: (errorId, details) => this.guard(() => this.dispatch({ type: 'upstream_failed', errorId, details })),
      },
    });
    if (restore) this.link.restore(config, restore.segment, restore.finalUntil);
    else this.link.open(config);
  }

  /** A text message of the current upstream session, already on the client's timeline. */
  private onUpstreamMessage(type: string | undefined, data: Buffer): void {
    try {
      this.upstreamMessage(type, data);
      if (!this.over) this.flushes.relayed(type);
    } catch (err) {
      this.crash(err);
    }
  }

  private upstreamMessage(type: string | undefined, data: Buffer): void {
    if (this.handover && (type === 'ended' || type === 'ENDED')) return this.handedOverNow();
    // This upstream session's final usage is the ledger's; the client's session goes on elsewhere.
    if (this.handover && type === 'usage') return void this.recordUsage(type, data);
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
        return this.relay(this.usageForClient(type, this.recordUsage(type, data)));
      case 'ended':
      case 'ENDED':
        this.clearTimer('upstream_answer');
        return this.dispatch({ type: 'upstream_ended', data });
      case 'transcript':
        // A client falling behind loses interim transcripts first, never a final one.
        if (this.client.backlog() > SHED_BACKLOG_BYTES && isInterimOnly(data)) return this.shed();
        this.relay(data);
        if (this.onFinal && this.link && this.link.finalUntil > this.finalNoted) {
          this.finalNoted = this.link.finalUntil;
          this.onFinal();
        }
        return;
      default:
        return this.relay(data); // facts, commands, flushed, errors: bytes as they came
    }
  }

  /** The first upstream session took the config: audio can flow, and the client is told. */
  private onConfigAccepted(data: Buffer): void {
    this.clearTimer('upstream_answer');
    metrics.configLatency.observe({ endpoint: this.info.endpoint }, (Date.now() - this.configReceivedAt) / 1000);
    this.becomeLive(false);
    this.recordUpstreamSession(data);
    this.startPipeline();
    this.dispatch({ type: 'upstream_config_status', status: 'CONFIG_ACCEPTED', data });
  }

  /** A new upstream session took over (its replay is sent): the client hears of it only if it asked. */
  private onReconnected(data: Buffer): void {
    this.recordUpstreamSession(data);
    this.pipeline?.discardQueued(); // the replay carried what was waiting to be paced out
    if (this.info.notices) this.sendClient(JSON.stringify(serverMessages.notice('UPSTREAM_RECONNECTED', 'the speech service connection was replaced; nothing was lost')));
    this.dispatch({ type: 'upstream_reconnected' });
  }

  /** The ledger session starts now (a restored one goes on from the replica it started on). */
  private becomeLive(restored: boolean): void {
    this.live = true;
    const { tenant, endpoint, interactionId } = this.info;
    if (!restored) this.deps.ledger.sessionStarted({ sessionKey: this.key, tenant, endpoint, interactionId, startedAt: Date.now() });
    metrics.activeSessions.inc({ endpoint, tenant: tenantLabel(tenant) });
  }

  /** The tenant's slot is taken once the config is valid, before any upstream session opens: a
   *  config over the cap is refused and costs no upstream session. */
  private openWithSlot(config: unknown): void {
    const { tenant } = this.info;
    this.onConfigured?.(); // from now on the tenant's cap bounds it
    this.deps.limiter.acquire(tenant, this.key).then((ok) => this.guard(() => {
      if (this.over) return void this.deps.limiter.release(tenant, this.key); // ended while it waited
      if (ok) return this.openUpstream(config);
      metrics.refusals.inc({ reason: 'tenant_limit' });
      this.dispatch({ type: 'slot_refused', details: `tenant "${tenant}" already has MAX_SESSIONS_PER_TENANT concurrent sessions; end one or retry later` });
    }), (err: unknown) => this.crash(err));
  }

  private recordUpstreamSession(data: Buffer): void {
    try {
      const accepted = JSON.parse(data.toString('utf8')) as { sessionId?: unknown; configuration?: unknown };
      this.accepted ??= { sessionId: accepted.sessionId, configuration: accepted.configuration };
      const sessionId = accepted.sessionId;
      if (typeof sessionId !== 'string') return;
      this.upstreamSessionId = sessionId;
      this.deps.ledger.setUpstreamSessionId(this.key, sessionId, this.link?.segment ?? 0);
    } catch {
      /* relayed as is; the id is only for records */
    }
  }

  private startPipeline(): void {
    this.pipeline = createAudioPipeline({
      plan: this.plan ?? { mode: 'detect' },
      chunkMs: this.deps.settings.chunkMs,
      pace: this.deps.settings.pace,
      maxBufferedBytes: this.deps.settings.maxBufferedAudioBytes,
      onUnit: (unit, kind) => {
        if (this.lossFrom !== undefined && unit.start !== undefined) this.countLoss(unit.start);
        if (unit.header && this.initBytes <= MAX_INIT_BYTES) {
          this.init.push(unit.bytes);
          this.initBytes += unit.bytes.length;
        }
        return this.link?.unit(unit, kind) ?? unit;
      },
      onFrame: (frame) => this.onFrame(frame),
      onError: (err) => this.guard(() => this.dispatch({ type: 'audio_failed', errorId: err.id, details: err.details })),
    });
  }

  /** After a crash takeover, the restored stream's first media: what lies between the client's last
   * final and it is what the dead owner lost (its received, unfinalised audio, and what the client
   * did not resend). */
  private countLoss(start: number): void {
    const lost = Math.max(0, start - this.lossFrom!);
    this.lossFrom = undefined;
    if (lost > 0) metrics.takeoverLostMedia.inc(lost);
    this.log.info({ event: 'takeover_lost_media', lostMediaSeconds: Number(lost.toFixed(3)) }, 'media lost with the dead replica');
  }

  /** A frame out of the pipeline, paced: upstream now. */
  private onFrame(frame: Buffer): void {
    try {
      this.link?.sendAudio(frame);
      if (this.oldestUnsentAudioAt !== undefined) {
        CLIENT_TO_UPSTREAM.observe((performance.now() - this.oldestUnsentAudioAt) / 1000);
        this.oldestUnsentAudioAt = undefined;
      }
    } catch (err) {
      this.crash(err);
    }
  }

  /**
   * Records the upstream's figure and returns what the client is sent: the message as it came, or,
   * when the ledger refused its figure (out of range, not a number), the same message with a figure
   * the ledger holds: 0 for a delta, the session's provisional sum for a final. The client still gets
   * its delta_usage after `flushed` and its usage before `ended`.
   */
  private recordUsage(kind: 'delta_usage' | 'usage', data: Buffer): Buffer {
    let message: unknown;
    try {
      message = JSON.parse(data.toString('utf8'));
    } catch {
      message = undefined;
    }
    const fields = typeof message === 'object' && message !== null && !Array.isArray(message) ? (message as Record<string, unknown>) : {};
    const credits = typeof fields.credits === 'number' ? fields.credits : Number.NaN;
    const final = kind === 'usage';
    const at = Date.now();
    if (this.deps.ledger.recordUsage({ sessionKey: this.key, seq: ++this.usageSeq, seg: this.link?.segment ?? 0, kind: final ? 'final' : 'delta', credits, at })) {
      if (final) this.finalCredits = credits;
      else this.deltaCredits += credits;
      this.credits.add(this.link?.segment ?? 0, final ? 'final' : 'delta', credits);
      return data;
    }
    return Buffer.from(JSON.stringify({ ...fields, type: kind, credits: final ? this.finalCredits ?? this.deltaCredits : 0 }));
  }

  /** A usage message as the client gets it: the session's figures over every upstream session. */
  private usageForClient(kind: 'delta_usage' | 'usage', data: Buffer): Buffer {
    let fields: unknown;
    try {
      fields = JSON.parse(data.toString('utf8'));
    } catch {
      fields = undefined; // the figures alone
    }
    const rest = typeof fields === 'object' && fields !== null && !Array.isArray(fields) ? fields : {};
    return Buffer.from(JSON.stringify({ ...rest, type: kind, credits: this.credits.forClient(kind) }));
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
        return this.sendClient(JSON.stringify(e.message));
      case 'relay_client':
        return this.relay(e.data);
      case 'close_client':
        if (this.clientOpen) {
          this.clientOpen = false;
          this.client.close(e.code, e.reason);
        }
        return;
      case 'open_upstream':
        return this.openWithSlot(e.config);
      case 'forward_audio':
        return this.forwardAudio(e.audio);
      case 'flush_upstream':
        return this.flushes.ask();
      case 'end_upstream':
        this.flushes.beforeEnd();
        return this.sendControlAfterDrain({ type: 'end' });
      case 'close_upstream':
        this.dropAudio();
        this.link?.close();
        return;
      case 'reconnect_upstream':
        this.clearTimer('upstream_answer'); // the link bounds its own attempts
        return this.link?.reconnect();
      case 'clear_timer':
        return this.clearTimer(e.timer);
      case 'start_resume_grace':
        return this.timer('resume_grace', this.deps.settings.resumeGraceSeconds * 1000, { type: 'resume_grace' });
      case 'finish':
        return this.finish(e.outcome);
    }
  }

  private relay(data: Buffer): void {
    const started = performance.now();
    this.sendClient(data);
    UPSTREAM_TO_CLIENT.observe((performance.now() - started) / 1000);
  }

  private shed(): void {
    metrics.shedMessages.inc({ kind: 'interim_transcript' });
  }

  /** Every send is checked: a client that stops reading is closed and the session says so, rather
   * than losing a final transcript or its usage without a trace. */
  private sendClient(text: string | Buffer): void {
    if (this.missed && (this.state.detached || this.resumePending || this.handover)) return this.keepForResume(text);
    this.sendNow(text);
  }

  /** To the socket now, past the output a resuming client has not been given yet. */
  private sendNow(text: string | Buffer): void {
    if (!this.clientOpen || this.clientSlow) return;
    if (this.client.sendText(text)) return;
    this.clientSlow = true;
    // After the effect being performed, not inside it: the machine handles one event at a time.
    queueMicrotask(() => this.guard(() => this.dispatch({ type: 'client_too_slow', details: 'the client is not reading its messages' })));
  }

  /** While the client is away, its output waits; too much of it and the session stops waiting. */
  private keepForResume(text: string | Buffer): void {
    if (this.missed?.push(text)) return;
    this.missed = undefined;
    metrics.resumes.inc({ result: 'missed_overflow' });
    queueMicrotask(() => this.guard(() => this.dispatch({ type: 'resume_grace' })));
  }

  /** Nothing more of this stream goes upstream; a flush/end still waiting goes out. */
  private dropAudio(): void {
    this.inbox.clear();
    this.ordered = this.ordered.filter((item) => !Buffer.isBuffer(item));
    this.orderedBytes = 0;
    this.pipeline?.close();
  }

  private forwardAudio(audio: Buffer): void {
    this.oldestUnsentAudioAt ??= performance.now();
    this.flushes.audio();
    if (!this.ordering) return this.pipeline?.push(audio);
    this.orderedBytes += audio.length;
    const last = this.ordered.at(-1);
    if (Buffer.isBuffer(last) && last.length < JOIN_BELOW_BYTES) this.ordered[this.ordered.length - 1] = Buffer.concat([last, audio]);
    else this.ordered.push(audio);
  }

  /** flush/end keep their place in the stream: audio before them goes first, audio after waits
   * (a flush, audio, then end: that audio goes upstream before the end). The upstream's answer to
   * `end` is awaited from when `end` is sent, not from when the client asked: audio still being paced
   * out is not cut short. */
  private sendControlAfterDrain(message: Control): void {
    this.ordered.push(message);
    if (!this.ordering) void this.sendInOrder();
  }

  private async sendInOrder(): Promise<void> {
    this.ordering = true;
    try {
      for (let n = 1; this.ordered.length > 0 && !this.over; n++) {
        if (n % YIELD_EVERY === 0) await new Promise(setImmediate);
        const item = this.ordered.shift()!;
        if (Buffer.isBuffer(item)) {
          this.orderedBytes -= item.length;
          this.pipeline?.push(item);
          continue;
        }
        await this.pipeline?.drain(item.type === 'end'); // a flush keeps a transcoded stream going
        if (!this.over) this.guard(() => this.sendControl(item));
      }
    } catch (err) {
      this.guard(() => this.dispatch({ type: 'audio_failed', errorId: 'AUDIO_MALFORMED', details: (err as Error).message }));
    } finally {
      this.ordering = false;
    }
  }

  private sendControl(message: Control): void {
    this.link?.sendControl(message); // while reconnecting: after the new upstream session's replay
    if (message.type === 'end' && this.state.phase !== 'reconnecting') {
      this.timer('upstream_answer', this.deps.settings.endTimeoutMs, {
        type: 'upstream_failed', errorId: 'UPSTREAM_TIMEOUT', details: 'the speech service did not end the session in time',
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
      this.dispatch({ type: 'internal_error', details: 'the gateway failed while handling this session; open a new one' });
    } catch (again) {
      // The graceful path threw too: close both sides and record the session as it stands.
      this.log.error({ event: 'session_crash', err: again }, 'ending the session failed; closing it');
      this.state = { ...this.state, phase: 'closed', outcome: 'error' };
      try { this.perform({ type: 'close_upstream' }); } catch { /* already failing */ }
      try { this.perform({ type: 'close_client', code: 1011, reason: 'internal error' }); } catch { /* already failing */ }
      this.finish('error');
    }
  }

  private finish(outcome: Outcome): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    const stats = this.pipeline?.stats;
    const mediaSeconds = this.mediaBefore + (stats?.mediaSecondsIn ?? 0);
    this.handover?.(undefined);
    this.handover = undefined;
    if (this.live && !this.disowned) this.deps.ledger.sessionEnded({ sessionKey: this.key, outcome, mediaSeconds, endedAt: Date.now() });
    if (!this.disowned) void this.deps.limiter.release(this.info.tenant, this.key);
    const tenant = tenantLabel(this.info.tenant);
    if (this.live) metrics.activeSessions.dec({ endpoint: this.info.endpoint, tenant });
    metrics.sessionsTotal.inc({ endpoint: this.info.endpoint, outcome });
    const credits = this.finalCredits ?? this.deltaCredits;
    if (credits > 0) metrics.credits.inc({ tenant, endpoint: this.info.endpoint }, credits);
    if (stats) {
      const format = stats.source ?? 'unknown';
      metrics.audioBytes.inc({ direction: 'in', format }, stats.bytesIn);
      metrics.audioBytes.inc({ direction: 'out', format }, stats.bytesOut);
      metrics.audioSeconds.inc({ direction: 'in', format }, stats.mediaSecondsIn);
      metrics.audioSeconds.inc({ direction: 'out', format }, stats.mediaSecondsOut);
      metrics.framesSplit.inc(stats.framesSplit);
      metrics.framesCoalesced.inc(stats.framesCoalesced);
      if (stats.transcodeSeconds > 0) metrics.transcodeSeconds.inc({ format }, stats.transcodeSeconds);
    }
    this.log.info(
      {
        event: 'session_end',
        upstreamSession: this.upstreamSessionId,
        durationSeconds: (Date.now() - this.startedAt) / 1000,
        mediaSeconds,
        credits,
        estimated: this.finalCredits === undefined,
        outcome,
      },
      'session ended',
    );
    this.onFinished?.(this);
  }

  /** A named timer that feeds `event` to the machine when it fires. */
  private timer(name: string, ms: number, event: SessionEvent): void {
    this.clearTimer(name);
    const t = setTimeout(() => this.guard(() => {
      if (event.type === 'upstream_failed') metrics.upstreamFailures.inc({ cause: 'timeout' });
      this.dispatch(event);
    }), ms);
    t.unref?.();
    this.timers.set(name, t);
  }

  private clearTimer(name: string): void {
    const t = this.timers.get(name);
    if (t) clearTimeout(t);
    this.timers.delete(name);
  }
}

