// The standing subscribers of a session's lifecycle: the usage ledger, the metrics and the log.
import { metrics, tenantLabel, type Logger } from '../telemetry/index.js';
import type { UsageLedger } from '../usage/index.js';
import type { Lifecycle, LifecycleEvent } from './lifecycle.js';

export interface SessionIdentity {
  sessionKey: string;
  tenant: string;
  endpoint: 'transcribe' | 'streams';
  interactionId?: string;
  environment: string;
}

export function observeSession(lifecycle: Lifecycle, who: SessionIdentity, ledger: UsageLedger, log: Logger): void {
  lifecycle.on((e) => toLedger(e, who, ledger));
  lifecycle.on((e) => toMetrics(e, who));
  lifecycle.on((e) => toLog(e, log));
}

function toLedger(e: LifecycleEvent, who: SessionIdentity, ledger: UsageLedger): void {
  const { sessionKey, tenant, endpoint, interactionId, environment } = who;
  if (e.type === 'live' && !e.restored)
    ledger.sessionStarted({ sessionKey, tenant, endpoint, interactionId, environment, startedAt: e.at });
  if (e.type === 'upstream_segment') ledger.setUpstreamSessionId(sessionKey, e.upstreamSessionId, e.segment);
  if (e.type === 'ended' && e.live && e.owned)
    ledger.sessionEnded({
      sessionKey,
      outcome: e.outcome,
      mediaSeconds: e.mediaSeconds,
      endedAt: e.at,
      coverage: e.coverage,
    });
}

function toMetrics(e: LifecycleEvent, who: SessionIdentity): void {
  const labels = { endpoint: who.endpoint, tenant: tenantLabel(who.tenant) };
  const counted = { ...labels, environment: who.environment }; // not on the gauge: its series stay as they were
  switch (e.type) {
    case 'live':
      // Its credit and speech series exist at 0 from now, so that increase() counts their first figures too.
      metrics.credits.inc(counted, 0);
      metrics.speechSeconds.inc(labels, 0);
      metrics.untranscribedSpeechSeconds.inc(labels, 0);
      metrics.upstreamStalls.inc(labels, 0);
      return void metrics.activeSessions.inc(labels);
    case 'config_accepted':
      return void metrics.configLatency.observe({ endpoint: who.endpoint }, e.latencySeconds);
    case 'resumed':
      return void metrics.resumes.inc({ result: 'resumed' });
    case 'handed_over':
      if (e.credits > 0) metrics.credits.inc(counted, e.credits);
      if (e.live) metrics.activeSessions.dec(labels);
      return;
    case 'upstream_stalled':
      return void metrics.upstreamStalls.inc(labels);
    case 'ended':
      if (e.live) metrics.activeSessions.dec(labels);
      metrics.sessionsTotal.inc({ endpoint: who.endpoint, outcome: e.outcome, environment: who.environment });
      if (e.coverage && e.owned) {
        metrics.speechSeconds.inc(labels, e.coverage.speechSeconds);
        metrics.untranscribedSpeechSeconds.inc(labels, e.coverage.speechSeconds - e.coverage.coveredSeconds);
      }
      if (e.credits > 0) metrics.credits.inc(counted, e.credits);
      if (e.stats) audioMetrics(e.stats);
      return;
  }
}

function audioMetrics(stats: NonNullable<Extract<LifecycleEvent, { type: 'ended' }>['stats']>): void {
  const format = stats.source ?? 'unknown';
  metrics.audioBytes.inc({ direction: 'in', format }, stats.bytesIn);
  metrics.audioBytes.inc({ direction: 'out', format }, stats.bytesOut);
  metrics.audioSeconds.inc({ direction: 'in', format }, stats.mediaSecondsIn);
  metrics.audioSeconds.inc({ direction: 'out', format }, stats.mediaSecondsOut);
  metrics.framesSplit.inc(stats.framesSplit);
  metrics.framesCoalesced.inc(stats.framesCoalesced);
  if (stats.transcodeSeconds > 0) metrics.transcodeSeconds.inc({ format }, stats.transcodeSeconds);
}

function toLog(e: LifecycleEvent, log: Logger): void {
  switch (e.type) {
    case 'opened':
      return log.info({ event: 'session_start', restored: e.restored }, 'session started');
    case 'resumed':
      return log.info(
        { event: 'client_resumed', missed: e.missed, audioBytes: e.audioBytes },
        'client resumed its session',
      );
    case 'handed_over':
      return log.info(
        { event: 'session_handed_over', segment: e.segment, finalUntil: e.finalUntil, missed: e.missed },
        'session handed over',
      );
    case 'ended':
      return log.info(
        {
          event: 'session_end',
          upstreamSession: e.upstreamSessionId,
          durationSeconds: e.durationSeconds,
          mediaSeconds: e.mediaSeconds,
          credits: e.credits,
          estimated: e.estimated,
          outcome: e.outcome,
        },
        'session ended',
      );
  }
}
