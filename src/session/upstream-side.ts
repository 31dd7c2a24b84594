// The session's upstream side: it takes the tenant's slot and opens the upstream link, reads each
// upstream message once into what the session needs (a config answer, usage, a transcript, the end;
// anything else is relayed as it came), and sends paced audio and controls upstream, with the
// deadlines the service's answers have.
import { createReplayBuffer } from '../audio/index.js';
import { holdsNoFinal, serverMessages } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import type { UpstreamTarget } from '../upstream/index.js';
import type { SessionConfig } from './config.js';
import type { Control } from './intake.js';
import { migrating } from './machine.js';
import type { Restore } from './resume.js';
import type { Driver, Link, Parts } from './types.js';
import { UpstreamLink, type LinkOptions } from './upstream-link.js';

export class UpstreamSide {
  link?: Link;
  upstreamSessionId?: string;
  /** how far the finals given to the client's socket cover its stream, as last told (final_delivered);
   *  finals kept for it while it is away are not its yet */
  finalNoted = 0;

  constructor(
    private readonly p: Parts,
    private readonly config: SessionConfig,
    private readonly driver: Driver,
    /** the ledger session starts: the first CONFIG_ACCEPTED */
    private readonly live: () => void,
  ) {}

  /** The current upstream session's index (0 the first; each reconnection or replica adds one). */
  get segment(): number {
    return this.link?.segment ?? 0;
  }

  /** The tenant's slot is taken once the config is valid, before any upstream session opens: a
   *  config over the cap is refused and costs no upstream session. */
  openWithSlot(config: unknown): void {
    const { info, deps, lifecycle } = this.p;
    lifecycle.emit({ type: 'configured' }); // from now on the tenant's cap bounds it
    deps.limiter.acquire(info.tenant, info.sessionKey).then(
      (ok) =>
        this.driver.guard(() => {
          if (this.driver.state.phase === 'closed') return void deps.limiter.release(info.tenant, info.sessionKey);
          if (ok) return this.open(config);
          metrics.refusals.inc({ reason: 'tenant_limit' });
          this.p.lifecycle.emit({ type: 'refused', reason: 'tenant_limit' });
          this.driver.dispatch({
            type: 'slot_refused',
            details: `tenant "${info.tenant}" already has MAX_SESSIONS_PER_TENANT concurrent sessions; end one or retry later`,
          });
        }),
      (err: unknown) => this.driver.crash(err),
    );
  }

  /** A new upstream session, or with `restore` the next segment of one taken over from another replica. */
  open(config: unknown, restore?: Restore): void {
    const { settings } = this.p.deps;
    if (!restore)
      this.driver.timer('upstream_answer', settings.configTimeoutMs, {
        type: 'upstream_failed',
        errorId: 'UPSTREAM_TIMEOUT',
        details: 'the speech service did not answer the config in time',
      });
    this.link = (this.p.deps.createLink ?? ((o) => new UpstreamLink(o)))(this.linkOptions());
    if (restore) this.link.restore(config, restore.segment, restore.finalUntil);
    else this.link.open(config);
  }

  private linkOptions(): LinkOptions {
    const { info, deps, log } = this.p;
    const { settings, credentials } = deps;
    const { driver } = this;
    return {
      endpoint: info.endpoint,
      target: () =>
        credentials.tokenFor(info.tenant, info.clientToken).then((token): UpstreamTarget => ({
          wsBase: settings.upstreamWsBase,
          endpoint: info.endpoint,
          interactionId: info.interactionId,
          tenant: info.tenant,
          token,
          environment: info.environment,
        })),
      connectTimeoutMs: settings.configTimeoutMs,
      liveness: settings.upstreamLiveness,
      policy: settings.reconnect,
      createReplay: createReplayBuffer,
      log,
      handlers: {
        onMessage: (type, data, receivedAt) => this.onMessage(type, data, receivedAt),
        onReady: (data, reconnected) =>
          driver.guard(() => {
            this.p.speech.ready();
            return reconnected ? this.onReconnected(data) : this.onConfigAccepted(data);
          }),
        onLost: (errorId, details) =>
          driver.guard(() => driver.dispatch({ type: 'upstream_dropped', errorId, details })),
        onFailed: (errorId, details) =>
          driver.guard(() => driver.dispatch({ type: 'upstream_failed', errorId, details })),
        onFinal: (start, end) => this.onFinal(start, end),
        given: () => this.finalGiven,
      },
    };
  }

  /** A text message of the current upstream session, already on the client's timeline. */
  private onMessage(type: string | undefined, data: Buffer, receivedAt: number): void {
    try {
      this.route(type, data, receivedAt);
      if (this.driver.state.phase !== 'closed') this.p.intake.flushes.relayed(type);
    } catch (err) {
      this.driver.crash(err);
    }
  }

  private route(type: string | undefined, data: Buffer, receivedAt: number): void {
    const { usage, output, timers } = this.p;
    // This upstream session's final usage is the ledger's; the client's session goes on elsewhere.
    if (migrating(this.driver.state) && type === 'usage') return void usage.record(type, data, this.segment);
    switch (type) {
      case 'CONFIG_DENIED':
      case 'CONFIG_REJECTED':
      case 'CONFIG_TIMEOUT':
      case 'CONFIG_NOT_PROVIDED':
      case 'CONFIG_ALREADY_RECEIVED':
      case 'CONFIG_MISSING':
        timers.clear('upstream_answer');
        return this.driver.dispatch({ type: 'upstream_config_status', status: type, data });
      case 'delta_usage':
      case 'usage':
        return output.relay(usage.forClient(type, usage.record(type, data, this.segment)), receivedAt);
      case 'ended':
      case 'ENDED':
        timers.clear('upstream_answer');
        if (this.p.info.notices && !migrating(this.driver.state))
          output.send(JSON.stringify(serverMessages.coverageNotice(this.p.speech.figures())));
        return this.driver.dispatch({ type: 'upstream_ended', data });
      case 'transcript':
        return this.transcript(data, receivedAt);
      default:
        return output.relay(data, receivedAt); // facts, commands, flushed, errors: bytes as they came
    }
  }

  /** A client falling behind loses interim transcripts first, never a final one. The upstream session
   *  transcribes: its stall watch starts again. */
  private transcript(data: Buffer, receivedAt: number): void {
    this.p.speech.heard();
    // Interim results the gateway asked for on the client's behalf (config.ts) are not the client's.
    if (this.config.hidesInterims && holdsNoFinal(data)) return;
    if (!this.p.output.relayTranscript(data, receivedAt)) return;
    if (!this.p.output.holding) this.given();
  }

  /** The client's socket has every final so far (sent now, or what was kept for it just given). */
  given(): void {
    if (!this.link || this.link.finalUntil <= this.finalNoted) return;
    this.finalNoted = this.link.finalUntil;
    this.p.lifecycle.emit({ type: 'final_delivered', until: this.finalNoted });
  }

  /** Where the client's finals end for a successor that goes on from the record: while output waits
   *  for the client, the finals waiting with it are not counted (they die with this process). */
  get finalGiven(): number {
    const until = this.link?.finalUntil ?? 0;
    return this.p.output.holding ? Math.min(this.finalNoted, until) : until;
  }

  /** The first upstream session took the config: audio can flow, and the client is told. */
  private onConfigAccepted(data: Buffer): void {
    this.p.timers.clear('upstream_answer');
    const latencySeconds = (Date.now() - this.config.receivedAt) / 1000;
    this.p.lifecycle.emit({ type: 'config_accepted', latencySeconds });
    this.live();
    this.noteSegment(data);
    this.p.stream.start();
    const forClient = this.config.acceptedForClient(data);
    this.driver.dispatch({ type: 'upstream_config_status', status: 'CONFIG_ACCEPTED', data: forClient });
  }

  /** A new upstream session took over (its replay is sent): the client hears of it only if it asked. */
  private onReconnected(data: Buffer): void {
    this.noteSegment(data);
    this.p.stream.pipeline?.discardQueued(); // the replay carried what was waiting to be paced out
    if (this.p.info.notices) {
      const notice = serverMessages.notice(
        'UPSTREAM_RECONNECTED',
        'the speech service connection was replaced; nothing was lost',
      );
      this.p.output.send(JSON.stringify(notice));
    }
    this.driver.dispatch({ type: 'upstream_reconnected' });
  }

  private noteSegment(data: Buffer): void {
    const sessionId = this.config.noteAccepted(data);
    if (sessionId === undefined) return;
    this.upstreamSessionId = sessionId;
    this.p.lifecycle.emit({ type: 'upstream_segment', upstreamSessionId: sessionId, segment: this.segment });
  }

  /** A frame out of the pipeline, paced: upstream now. */
  sendFrame(frame: Buffer): void {
    try {
      const sent = this.link?.sendAudio(frame);
      this.p.intake.sent();
      const until = this.p.stream.pipeline?.stats.outUntil ?? 0;
      if (sent && this.p.speech.sent(until)) this.stalled();
    } catch (err) {
      this.driver.crash(err);
    }
  }

  /** A final for the client: what it covers of the speech, and what the watch has to say of it. */
  private onFinal(start: number, end: number): void {
    const said = this.p.speech.final(start, end);
    if (!said || !this.p.info.notices) return;
    const details =
      said.kind === 'recovered'
        ? `transcripts cover the audio of the stall again (${said.start}-${said.end} s)`
        : `no final transcript covers ${said.speechSeconds} s of speech at ${said.start}-${said.end} s of the audio`;
    const id = said.kind === 'recovered' ? 'TRANSCRIPTION_RECOVERED' : 'TRANSCRIPTION_GAP';
    this.p.output.send(JSON.stringify(serverMessages.notice(id, details)));
  }

  /** Speech went upstream and nothing of a transcript came back: the upstream session is replaced. */
  private stalled(): void {
    const seconds = this.p.deps.settings.stallSpeechSeconds ?? 10;
    this.p.log.warn({ event: 'upstream_stalled', speechSeconds: seconds }, 'the upstream session stopped transcribing');
    this.p.lifecycle.emit({ type: 'upstream_stalled' });
    if (this.p.info.notices)
      this.p.output.send(
        JSON.stringify(
          serverMessages.notice(
            'TRANSCRIPTION_STALLED',
            `the speech service returned no transcript for ${seconds} s of speech; reconnecting and sending that audio again`,
          ),
        ),
      );
    this.link?.stalled(`the speech service returned no transcript for ${seconds} s of speech`);
  }

  /** While reconnecting the control goes after the new upstream session's replay. */
  sendControl(message: Control): void {
    this.link?.sendControl(message);
    if (message.type === 'end' && this.driver.state.phase !== 'reconnecting') {
      this.driver.timer('upstream_answer', this.p.deps.settings.endTimeoutMs, {
        type: 'upstream_failed',
        errorId: 'UPSTREAM_TIMEOUT',
        details: 'the speech service did not end the session in time',
      });
    }
  }

  /** A restored session's upstream session, deferred until media past its last final, opens now
   * (the client's end came first). What the client sent before its end goes into the replay first:
   * media the parser still held would come after it, put on the timeline from the Cluster's start. */
  openRestored(): void {
    this.p.stream.pipeline?.pauseInput();
    this.link?.openRestored();
  }

  /** The link bounds its own attempts. */
  reconnect(): void {
    this.p.timers.clear('upstream_answer');
    this.link?.reconnect();
  }

  close(): void {
    this.link?.close();
  }
}
