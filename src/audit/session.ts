// A session's lifecycle (session/lifecycle.ts) as audit events: who (from the session's info), what
// happened, and on its end the media seconds, credits and speech figures (how much, never where or
// what). Steps with nothing to audit (usage deltas, finals delivered) give none.
import type { LifecycleEvent, SessionInfo } from '../session/index.js';
import type { AuditInput } from './event.js';

/** A session's info as the upgrade gate builds it: with the socket's peer beside the client's address
 * (the session keeps the object, so the peer reaches every event of the session). */
export type AuditedInfo = SessionInfo & { peer?: string };

/** Who and what of every event of the session `info` describes. */
export function sessionWho(info: AuditedInfo): Omit<AuditInput, 'event' | 'outcome'> {
  return {
    tenant: info.tenant,
    subject: info.subject,
    clientId: info.clientId,
    address: info.address,
    peer: info.peer,
    endpoint: info.endpoint,
    interactionId: info.interactionId,
    sessionId: info.sessionKey,
    resumeKey: info.resumeKey,
    environment: info.environment,
  };
}

export function sessionEvent(info: SessionInfo, e: LifecycleEvent): AuditInput | undefined {
  const who = sessionWho(info);
  switch (e.type) {
    case 'opened':
      return { ...who, event: e.restored ? 'session_restored' : 'session_opened', outcome: 'ok' };
    case 'config_accepted':
      return { ...who, event: 'config_accepted', outcome: 'ok' };
    case 'refused':
      return { ...who, event: 'config_refused', outcome: 'refused', reason: e.reason };
    case 'resumed':
      return { ...who, event: 'session_resumed', outcome: 'ok' };
    case 'taken_over':
      return { ...who, event: 'session_taken_over', outcome: 'ok', reason: e.from };
    case 'handed_over':
      return { ...who, event: 'session_handed_over', outcome: 'ok', credits: e.credits };
    case 'ended':
      return {
        ...who,
        event: 'session_ended',
        outcome: e.outcome,
        mediaSeconds: e.mediaSeconds,
        credits: e.credits,
        // The session's own figures: one another replica took over ends there with its whole history.
        ...(e.owned && e.coverage ? speechFigures(e.coverage) : {}),
      };
    default:
      return undefined;
  }
}

type Coverage = NonNullable<Extract<LifecycleEvent, { type: 'ended' }>['coverage']>;

/** Speech forwarded, the part finals cover, the gaps (listed and not) and the speech the listed hold. */
function speechFigures(
  c: Coverage,
): Pick<AuditInput, 'speechSeconds' | 'transcribedSpeechSeconds' | 'gaps' | 'gapSeconds'> {
  const gapMs = c.gaps.reduce((sum, g) => sum + Math.round(g.speechSeconds * 1000), 0);
  return {
    speechSeconds: c.speechSeconds,
    transcribedSpeechSeconds: c.coveredSeconds,
    gaps: c.gaps.length + c.moreGaps,
    gapSeconds: gapMs / 1000,
  };
}
