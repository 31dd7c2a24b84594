// The session's config: the client's, validated once (protocol, then the audio plan), what the
// upstream is sent instead (its audio format as the plan has it), and what the first CONFIG_ACCEPTED
// told the client. A socket that resumes the session must send the same config, and is told the same.
import { planAudio, type AudioPlan } from '../audio/index.js';
import { serverMessages, validateConfig, type Endpoint } from '../protocol/index.js';
import type { ConfigVerdict } from './machine.js';
import { sameConfig } from './resume.js';

export type Accepted = { sessionId?: unknown; configuration?: unknown };

const formats = { isSupportedAudioFormat: (mime: string) => planAudio(mime).ok };

export class SessionConfig {
  /** the client's validated config */
  client?: unknown;
  accepted?: Accepted;
  /** when the session's first CONFIG_ACCEPTED came (ms since the epoch), on whichever replica: its
   *  time limit counts from it, across handovers and takeovers */
  acceptedAt?: number;
  /** the upstream is asked for interim results the client did not ask for (the stall watch needs
   *  them: a recogniser without them says nothing until an utterance ends); they are not relayed */
  hidesInterims = false;
  /** when the client's config arrived (the config_accepted latency counts from it) */
  receivedAt = 0;

  constructor(private readonly endpoint: Endpoint) {}

  /** Protocol validation, then the audio plan (which formats pass through, which are transcoded). */
  check(configuration: unknown): { verdict: ConfigVerdict; plan?: AudioPlan } {
    const v = validateConfig(this.endpoint, configuration, formats);
    if (!v.ok) return { verdict: v };
    this.client = v.config;
    const planned = planAudio((v.config as { audioFormat?: string }).audioFormat);
    if (!planned.ok) return { verdict: { ok: false, status: 'rejected', reason: planned.reason } };
    const upstreamConfig: Record<string, unknown> = { ...(v.config as object) };
    if (planned.plan.upstreamAudioFormat) upstreamConfig.audioFormat = planned.plan.upstreamAudioFormat;
    else delete upstreamConfig.audioFormat;
    this.hidesInterims = this.endpoint === 'transcribe' && upstreamConfig.interimResults !== true;
    if (this.hidesInterims) upstreamConfig.interimResults = true;
    return { verdict: { ok: true, upstreamConfig }, plan: planned.plan };
  }

  /** A resuming socket's config is the session's (key order aside). */
  sameAsClient(configuration: unknown): boolean {
    const v = validateConfig(this.endpoint, configuration, formats);
    return v.ok && sameConfig(v.config, this.client);
  }

  /** The first upstream CONFIG_ACCEPTED is what every resume is told; returns its session id. */
  noteAccepted(data: Buffer): string | undefined {
    try {
      const a = JSON.parse(data.toString('utf8')) as Accepted;
      this.accepted ??= { sessionId: a.sessionId, configuration: this.asClientSent(a.configuration) };
      return typeof a.sessionId === 'string' ? a.sessionId : undefined;
    } catch {
      return undefined; // relayed as is; the id is only for records
    }
  }

  /** The upstream's echo of its config, as the client sent it: without the interim results the
   *  gateway asked for on its behalf. */
  asClientSent(configuration: unknown): unknown {
    if (!this.hidesInterims || typeof configuration !== 'object' || configuration === null) return configuration;
    const c = { ...(configuration as Record<string, unknown>) };
    const asked = (this.client as { interimResults?: unknown } | undefined)?.interimResults;
    if (asked === undefined) delete c.interimResults;
    else c.interimResults = asked;
    return c;
  }

  /** The upstream's CONFIG_ACCEPTED as the client gets it (its echo as asClientSent says). */
  acceptedForClient(data: Buffer): Buffer {
    if (!this.hidesInterims) return data;
    try {
      const a = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      if (!('configuration' in a)) return data;
      return Buffer.from(JSON.stringify({ ...a, configuration: this.asClientSent(a.configuration) }));
    } catch {
      return data;
    }
  }

  /** What the resuming socket is told: accepted, as the first time, with where its audio stands. */
  resumedAnswer(audioBytes: number): string {
    return JSON.stringify({
      ...serverMessages.configStatus('CONFIG_ACCEPTED'),
      ...this.accepted,
      resumed: true,
      audioBytes,
    });
  }
}
