// The process's Prometheus registry and every gateway metric, defined once. The names are part of the
// runtime contract (docs/design.md, 'Metrics'): add, don't rename. Label sets are bounded (tenants go
// through tenantLabel).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { HotHistogram } from './hot-histogram.js';

export const registry = new Registry();
// Default process metrics include nodejs_eventloop_lag_seconds and the lag percentiles.
collectDefaultMetrics({ register: registry });

const registers = [registry];
// Latencies the gateway adds are sub-millisecond to seconds; connects and config answers are slower.
const fastBuckets = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const slowBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What the replay gauge reads at each scrape: set by the server, which holds the sessions. */
let replayHeld: () => number = () => 0;
export function measureReplayHeld(f: () => number): void {
  replayHeld = f;
}

/** Seconds the speech detector ran, added where it runs (a number, not a metric call per packet) and
 *  moved into its counter at each scrape. */
let detectorSeconds = 0;
export function detectorRan(seconds: number): void {
  detectorSeconds += seconds;
}

export const metrics = {
  activeSessions: new Gauge<'endpoint' | 'tenant'>({
    name: 'speech_gateway_active_sessions',
    help: 'Sessions open with an accepted config',
    labelNames: ['endpoint', 'tenant'],
    registers,
  }),
  unconfiguredSockets: new Gauge({
    name: 'speech_gateway_unconfigured_sockets',
    help: 'Client sockets open that have not sent a valid config (not sessions yet)',
    registers,
  }),
  sessionsTotal: new Counter<'endpoint' | 'outcome' | 'environment'>({
    name: 'speech_gateway_sessions_total',
    help: 'Sessions finished, by outcome and data-residency environment',
    labelNames: ['endpoint', 'outcome', 'environment'],
    registers,
  }),
  configLatency: new Histogram<'endpoint'>({
    name: 'speech_gateway_config_latency_seconds',
    help: 'Config received until CONFIG_ACCEPTED relayed',
    labelNames: ['endpoint'],
    buckets: slowBuckets,
    registers,
  }),
  upstreamConnectLatency: new Histogram<'endpoint'>({
    name: 'speech_gateway_upstream_connect_seconds',
    help: 'Time to open the upstream socket',
    labelNames: ['endpoint'],
    buckets: slowBuckets,
    registers,
  }),
  /** Observed per frame and per message: take a child once, `forwardLatency.labels('client_to_upstream')`. */
  forwardLatency: new HotHistogram({
    name: 'speech_gateway_added_latency_seconds',
    help: 'Latency the gateway adds to a message',
    labelName: 'direction',
    values: ['client_to_upstream', 'upstream_to_client'],
    buckets: fastBuckets,
    registers,
  }),
  audioBytes: new Counter<'direction' | 'format'>({
    name: 'speech_gateway_audio_bytes_total',
    help: 'Audio bytes received (in) and forwarded (out)',
    labelNames: ['direction', 'format'],
    registers,
  }),
  audioSeconds: new Counter<'direction' | 'format'>({
    name: 'speech_gateway_audio_seconds_total',
    help: 'Audio duration received (in) and forwarded (out)',
    labelNames: ['direction', 'format'],
    registers,
  }),
  framesSplit: new Counter({
    name: 'speech_gateway_frames_split_total',
    help: 'Client frames split to fit the chunk size',
    registers,
  }),
  framesCoalesced: new Counter({
    name: 'speech_gateway_frames_coalesced_total',
    help: 'Client frames merged into larger chunks',
    registers,
  }),
  transcodeSeconds: new Counter<'format'>({
    name: 'speech_gateway_transcode_seconds_total',
    help: 'Audio duration transcoded, by source format',
    labelNames: ['format'],
    registers,
  }),
  credits: new Counter<'tenant' | 'endpoint' | 'environment'>({
    name: 'speech_gateway_credits_total',
    help: 'Credits of finished sessions (final figure, or the provisional sum when estimated), by data-residency environment',
    labelNames: ['tenant', 'endpoint', 'environment'],
    registers,
  }),
  upstreamFailures: new Counter<'cause'>({
    name: 'speech_gateway_upstream_failures_total',
    help: 'Upstream sockets lost, by cause: closed (by the upstream, unasked), error, timeout (no answer in time), dead (a ping unanswered), stalled (answering, but no transcript for the speech sent)',
    labelNames: ['cause'],
    registers,
  }),
  drainSessions: new Counter<'result'>({
    name: 'speech_gateway_drain_sessions_total',
    help: "Sessions finished during a drain: ended (with the upstream's final usage) or aborted (usage estimated)",
    labelNames: ['result'],
    registers,
  }),
  refusals: new Counter<'reason'>({
    name: 'speech_gateway_refusals_total',
    help: 'Connections refused, by reason',
    labelNames: ['reason'],
    registers,
  }),
  /** the audit event is still in the other place (log or store); the session goes on */
  auditWriteFailures: new Counter<'sink'>({
    name: 'speech_gateway_audit_write_failures_total',
    help: 'Audit events that could not be written, by where (log: file or stdout, store: the query store)',
    labelNames: ['sink'],
    registers,
  }),
  /** a log line dropped because stdout's reader fell LOG_QUEUE_BYTES behind (audit lines: auditWriteFailures) */
  logLinesDropped: new Counter({
    name: 'speech_gateway_log_lines_dropped_total',
    help: 'Log lines not written: the reader of stdout fell LOG_QUEUE_BYTES behind, or stdout failed',
    registers,
  }),
  usageRefused: new Counter<'reason'>({
    name: 'speech_gateway_usage_refused_total',
    help: 'Upstream credit figures counted nowhere (the session is estimated): out_of_range (below 0 or above the per-message bound), unreadable (no numeric credits), overflow (a total would pass 2^53 micro-credits)',
    labelNames: ['reason'],
    registers,
  }),
  journalDepth: new Gauge({
    name: 'speech_gateway_usage_journal_depth',
    help: 'Usage events waiting in the on-disk journal for Redis',
    registers,
  }),
  journalDropped: new Counter({
    name: 'speech_gateway_usage_journal_dropped_total',
    help: 'Usage events not journaled: the on-disk journal was full, or the disk (a write failed)',
    registers,
  }),
  redisUp: new Gauge({ name: 'speech_gateway_redis_up', help: '1 if the usage ledger can write to Redis', registers }),
  tenantSessionCap: new Gauge({
    name: 'speech_gateway_tenant_session_cap',
    help: 'MAX_SESSIONS_PER_TENANT: concurrent sessions allowed per tenant (0 = no cap)',
    registers,
  }),
  upstreamReconnects: new Counter<'cause'>({
    name: 'speech_gateway_upstream_reconnects_total',
    help: 'Upstream sessions lost mid-session and replaced, by cause',
    labelNames: ['cause'],
    registers,
  }),
  upstreamReconnectResults: new Counter<'result'>({
    name: 'speech_gateway_upstream_reconnect_results_total',
    help: 'Reconnections that took (ok) or gave up (failed)',
    labelNames: ['result'],
    registers,
  }),
  upstreamReplayedBytes: new Counter({
    name: 'speech_gateway_upstream_replayed_bytes_total',
    help: 'Audio bytes sent again to a new upstream session',
    registers,
  }),
  resumeGapBytes: new Counter({
    name: 'speech_gateway_resume_gap_bytes_total',
    help: 'Client audio bytes skipped after a resume, to the next container boundary',
    registers,
  }),
  resumes: new Counter<'result'>({
    name: 'speech_gateway_resumes_total',
    help: 'Client resumes: sockets that took a session over, and how it went',
    labelNames: ['result'],
    registers,
  }),
  shedMessages: new Counter<'kind'>({
    name: 'speech_gateway_shed_messages_total',
    help: 'Messages not sent to a client that was falling behind, by kind',
    labelNames: ['kind'],
    registers,
  }),
  internalErrors: new Counter<'where'>({
    name: 'speech_gateway_internal_errors_total',
    help: 'Exceptions caught in a callback (each ended one session), by where',
    labelNames: ['where'],
    registers,
  }),
  handovers: new Counter<'result'>({
    name: 'speech_gateway_handovers_total',
    help: 'Resumable sessions the drain handed over (ok), that ended here instead (failed), or that nobody resumed in time (expired)',
    labelNames: ['result'],
    registers,
  }),
  takeovers: new Counter<'from'>({
    name: 'speech_gateway_takeovers_total',
    help: "Sessions taken over from another replica's record: after its handover, or after it died",
    labelNames: ['from'],
    registers,
  }),
  takeoverLostMedia: new Counter({
    name: 'speech_gateway_takeover_lost_media_seconds_total',
    help: 'Audio a replica that died had received but no final transcript covered (lost unless the client resends it)',
    registers,
  }),
  hops: new Counter<'result'>({
    name: 'speech_gateway_hops_total',
    help: 'Resumes for a session live on another replica: carried there over the internal hop, or not, by result',
    labelNames: ['result'],
    registers,
  }),
  upstreamStalls: new Counter<'endpoint' | 'tenant'>({
    name: 'speech_gateway_upstream_stalls_total',
    help: 'Upstream sessions that answered but returned no transcript for the speech sent (STALL_SPEECH_SECONDS), replaced',
    labelNames: ['endpoint', 'tenant'],
    registers,
  }),
  speechSeconds: new Counter<'endpoint' | 'tenant'>({
    name: 'speech_gateway_speech_seconds_total',
    help: 'Seconds of speech in the audio sessions forwarded (the speech detector), counted when a session ends',
    labelNames: ['endpoint', 'tenant'],
    registers,
  }),
  untranscribedSpeechSeconds: new Counter<'endpoint' | 'tenant'>({
    name: 'speech_gateway_untranscribed_speech_seconds_total',
    help: 'Of speech_gateway_speech_seconds_total, the seconds no final transcript covered, counted when a session ends',
    labelNames: ['endpoint', 'tenant'],
    registers,
  }),
  recordsRejected: new Counter<'reason'>({
    name: 'speech_gateway_session_records_rejected_total',
    help: 'Session records read from Redis and not used: not authenticated (MAC, version, shape), by reason',
    labelNames: ['reason'],
    registers,
  }),
  hopSessions: new Gauge({
    name: 'speech_gateway_hop_sessions',
    help: 'Client sockets this replica relays to the replica that holds their session',
    registers,
  }),
  replayBufferedBytes: new Gauge({
    name: 'speech_gateway_replay_buffered_bytes',
    help: 'Audio kept for replays to a new upstream session (what no final transcript covers yet), over all sessions',
    registers,
    collect() {
      this.set(replayHeld());
    },
  }),
  speechDetectorSeconds: new Counter({
    name: 'speech_gateway_speech_detector_seconds_total',
    help: 'Time the speech detector spent judging forwarded Opus packets (its share of the CPU)',
    registers,
    collect() {
      this.inc(detectorSeconds);
      detectorSeconds = 0;
    },
  }),
  fullAccessTokenAttempts: new Counter({
    name: 'speech_gateway_full_access_token_refusals_total',
    help: 'Full-access tokens refused from browsers',
    registers,
  }),
};

/** Refusal reasons besides the authenticator's (the server's and the session's). */
const OTHER_REFUSAL_REASONS = [
  'not_found',
  'draining',
  'tenant_limit',
  'unconfigured_limit',
  'bad_interaction_id',
  'bad_resume_key',
  'resume_refused',
  'resume_unavailable',
  'resume_key_in_use',
  'hop_forbidden',
  'hop_not_owner',
  'client_flood',
  'environment_not_served',
];

/**
 * Puts the counters dashboards and alerts read in /metrics at 0 for every known label value: a
 * series that appears only with its first event has no rate() or increase() for that event.
 */
export function initialiseCounters(authRefusalReasons: readonly string[]): void {
  for (const reason of [...authRefusalReasons, ...OTHER_REFUSAL_REASONS]) metrics.refusals.inc({ reason }, 0);
  for (const cause of ['closed', 'error', 'timeout', 'dead', 'stalled']) metrics.upstreamFailures.inc({ cause }, 0);
  for (const cause of ['upstream_closed', 'upstream_unavailable', 'upstream_timeout'])
    metrics.upstreamReconnects.inc({ cause }, 0);
  for (const result of ['ok', 'failed']) metrics.upstreamReconnectResults.inc({ result }, 0);
  for (const reason of ['out_of_range', 'unreadable', 'overflow']) metrics.usageRefused.inc({ reason }, 0);
  for (const sink of ['log', 'store']) metrics.auditWriteFailures.inc({ sink }, 0);
}
