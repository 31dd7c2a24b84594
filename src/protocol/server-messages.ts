// Messages the gateway itself sends, in the upstream's own shapes (docs/protocol.md, 'Server messages').
// Errors are built by errors.ts (errorMessage).
import type { Endpoint } from './endpoint.js';

export type ConfigStatusType =
  | 'CONFIG_ACCEPTED'
  | 'CONFIG_DENIED'
  | 'CONFIG_REJECTED'
  | 'CONFIG_TIMEOUT'
  | 'CONFIG_NOT_PROVIDED'
  | 'CONFIG_ALREADY_RECEIVED'
  | 'CONFIG_MISSING';

export interface ConfigStatusExtra {
  reason?: string;
  sessionId?: string;
  configuration?: unknown;
}

export interface ConfigStatusMessage extends ConfigStatusExtra {
  type: ConfigStatusType;
}

export const serverMessages = {
  /** Only the fields given are present (no `"reason": undefined` keys). */
  configStatus(type: ConfigStatusType, extra: ConfigStatusExtra = {}): ConfigStatusMessage {
    const msg: ConfigStatusMessage = { type };
    if (extra.reason !== undefined) msg.reason = extra.reason;
    if (extra.sessionId !== undefined) msg.sessionId = extra.sessionId;
    if (extra.configuration !== undefined) msg.configuration = extra.configuration;
    return msg;
  },
  flushed(): { type: 'flushed' } {
    return { type: 'flushed' };
  },
  deltaUsage(credits: number): { type: 'delta_usage'; credits: number } {
    return { type: 'delta_usage', credits };
  },
  usage(credits: number): { type: 'usage'; credits: number } {
    return { type: 'usage', credits };
  },
  /** `/transcribe` ends with "ended", `/streams` with "ENDED". */
  ended(endpoint: Endpoint): { type: 'ended' | 'ENDED' } {
    return { type: endpoint === 'transcribe' ? 'ended' : 'ENDED' };
  },
  /** The gateway's own word about the session, to clients that asked for notices (`notices=true`):
   *  the vendor SDK warns on message types it does not know, so others never get one. */
  notice(id: NoticeId, details: string): { type: 'notice'; notice: { id: NoticeId; details: string } } {
    return { type: 'notice', notice: { id, details } };
  },
  /** The session's speech and what its finals cover, before its end message (media seconds). */
  coverageNotice(c: {
    speechSeconds: number;
    coveredSeconds: number;
    gaps: Array<{ start: number; end: number; speechSeconds: number }>;
  }) {
    const pct = c.speechSeconds > 0 ? ` (${Math.round((1000 * c.coveredSeconds) / c.speechSeconds) / 10}%)` : '';
    return {
      type: 'notice' as const,
      notice: {
        id: 'TRANSCRIPT_COVERAGE' as NoticeId,
        details: `final transcripts cover ${c.coveredSeconds} of ${c.speechSeconds} s of speech${pct}, ${c.gaps.length} gaps`,
        coverage: { speechSeconds: c.speechSeconds, transcribedSpeechSeconds: c.coveredSeconds, gaps: c.gaps },
      },
    };
  },
};

/** UPSTREAM_RECONNECTED: the upstream connection was replaced, nothing lost; TRANSCRIPTION_STALLED:
 *  the speech service returned no transcript for the speech sent, it is replaced and that audio sent
 *  again; TRANSCRIPTION_RECOVERED: finals now cover that audio; TRANSCRIPTION_GAP: speech the finals
 *  passed over without covering (its media times in the details); TRANSCRIPT_COVERAGE: at the end, the
 *  session's speech and what its finals cover (with `coverage` figures). */
export type NoticeId =
  | 'UPSTREAM_RECONNECTED'
  | 'TRANSCRIPTION_STALLED'
  | 'TRANSCRIPTION_RECOVERED'
  | 'TRANSCRIPTION_GAP'
  | 'TRANSCRIPT_COVERAGE';

/** No config in time: /transcribe says CONFIG_TIMEOUT, /streams CONFIG_NOT_PROVIDED
 *  (docs/protocol.md, 'Per-connection states'). */
export function configTimeoutType(endpoint: Endpoint): 'CONFIG_TIMEOUT' | 'CONFIG_NOT_PROVIDED' {
  return endpoint === 'transcribe' ? 'CONFIG_TIMEOUT' : 'CONFIG_NOT_PROVIDED';
}
