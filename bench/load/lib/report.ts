// Results of the load benchmark: per-peer figures, ratios to nginx, latency added over direct,
// the issue's targets met or missed; bench/results/load.json and load.md, and the table on stdout.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Load, WorkerResult } from './drive.js';
import type { HttpResult } from './http.js';

export interface Leg extends Omit<WorkerResult, 'latencies'> {
  name: string;
  latencies: number[];
  idleRssBytes: number;
  baselineRssBytes: number;
  peakRssBytes: number;
  cpuHoldSeconds: number;
  kernelShare: number | null;
  cpuSecondsPerSessionHour: number | null;
  bytesPerSession: number | null;
  /** of it, file-backed pages (code first touched under load), per session */
  sharedBytesPerSession: number | null;
  /** the gateway's replay audio per session, and the growth of its external (Buffer) memory and of
   * its V8 heap in use per session, a second before the hold ended */
  replayBytesPerSession: number | null;
  externalBytesPerSession: number | null;
  heapBytesPerSession: number | null;
  /** the gateway's speech detector, seconds per session-hour over the hold */
  detectorSecondsPerSessionHour: number | null;
  load: Load;
  during?: unknown;
}

const results = new URL('../../results/', import.meta.url);
const PCTS = [50, 99, 99.9] as const;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Real-time sessions per core: 3600 / CPU-s per session-hour when p99 added latency held under 5 ms at this load. */
const perCore = (cpu: number | null, p99Added: number) => (cpu && p99Added < 5 ? 3600 / cpu : null);

const ratio = (a: number | null | undefined, b: number | null | undefined) => (a && b ? a / b : null);
const withoutReplay = (l: Leg) =>
  l.bytesPerSession === null ? null : l.bytesPerSession - (l.replayBytesPerSession ?? 0);

function summarize(legs: Leg[]) {
  const lat = (l: Leg) => {
    const s = [...l.latencies].sort((a, b) => a - b);
    return PCTS.map((p) => pct(s, p));
  };
  // The floor pools every direct leg (first and last in the run), so drift over the run hits it too.
  const floor = { latencies: legs.filter(isDirect).flatMap((l) => l.latencies) } as Leg;
  const direct = lat(floor);
  // Latency added over legs that themselves fell behind says nothing: no sessions/core from it.
  const referencesKeptUp = !legs.some((l) => fellBehind(l, lat(l)[1]));
  const nginx = legs.find((l) => l.name === 'nginx');
  return legs.map((l) => {
    const own = lat(l);
    const added = own.map((v, i) => v - direct[i]);
    const { latencies: _l, during, ...rest } = l;
    return {
      ...rest,
      chunksMeasured: l.latencies.length,
      latencyMs: Object.fromEntries(PCTS.map((p, i) => [`p${p}`, own[i]])),
      addedLatencyMs: Object.fromEntries(PCTS.map((p, i) => [`p${p}`, added[i]])),
      cpuVsNginx: ratio(l.cpuSecondsPerSessionHour, nginx?.cpuSecondsPerSessionHour),
      bytesWithoutReplay: withoutReplay(l),
      // Memory against nginx's is the gateway's without the audio it keeps for replays (nginx keeps none).
      memoryVsNginx: ratio(withoutReplay(l), nginx?.bytesPerSession),
      externalPerReplayByte:
        l.externalBytesPerSession !== null && l.replayBytesPerSession
          ? l.externalBytesPerSession / l.replayBytesPerSession
          : null,
      sessionsPerCoreP99Under5ms: referencesKeptUp ? perCore(l.cpuSecondsPerSessionHour, added[1]) : null,
      http: during as HttpResult[] | undefined,
    };
  });
}

/** What the targets read of bench/results/transcode.json (bench/transcode/pcm-to-opus.ts). */
interface TranscodeResults {
  flat: Array<{ variant: string; streamsPerCore: number }>;
}

function targets(rows: ReturnType<typeof summarize>) {
  const by = (n: string) => rows.find((r) => r.name === n);
  const gw = by('gateway');
  if (!gw) return []; // a partial run (BENCH_ONLY) without the gateway leg
  const nginx = by('nginx');
  const gwTls = by('gateway, wss upstream');
  const nginxTls = by('nginx, wss upstream');
  const opus20 = by('gateway, 20 ms Opus packets');
  const naive = by('naive ws proxy');
  const tc = existsSync(new URL('transcode.json', results))
    ? (JSON.parse(readFileSync(new URL('transcode.json', results), 'utf8')) as TranscodeResults)
    : null;
  const ours = tc ? Math.max(...tc.flat.filter((v) => v.variant.startsWith('ours')).map((v) => v.streamsPerCore)) : NaN;
  const ffmpeg = tc ? tc.flat.find((v) => v.variant.startsWith('ffmpeg'))!.streamsPerCore : NaN;
  const cpuTls = ratio(gwTls?.cpuSecondsPerSessionHour, nginxTls?.cpuSecondsPerSessionHour) ?? NaN;
  const memory = gw.memoryVsNginx ?? NaN;
  const tail = gw.addedLatencyMs['p99.9'] - (nginx?.addedLatencyMs['p99.9'] ?? NaN);
  // Added latency means something only while the legs it is measured against kept up.
  const behind = rows.filter((r) => fellBehind(r, r.latencyMs.p99));
  const unmeasured = behind.length
    ? `not measured: ${behind.map((r) => `${r.name} p99 ${fx(r.latencyMs.p99, 0)} ms`).join(', ')} (over ${REFERENCE_P99_MAX_MS} ms: the load generators or the upstream fell behind)`
    : undefined;
  const packets = ratio(opus20?.cpuSecondsPerSessionHour, gw.cpuSecondsPerSessionHour) ?? NaN;
  const perCoreRatio = ratio(gw.sessionsPerCoreP99Under5ms, naive?.sessionsPerCoreP99Under5ms) ?? NaN;
  const lostRepeated = rows.reduce((a, r) => a + r.lost + r.repeated, 0);
  const detector = ratio(gw.detectorSecondsPerSessionHour, gw.cpuSecondsPerSessionHour) ?? NaN;
  const t = (target: string, measured: string, met: boolean | null) => ({ target, measured, met });
  return [
    t('CPU per session-hour ≤ 1.5× nginx (ws upstream)', `${fx(gw.cpuVsNginx)}×`, (gw.cpuVsNginx ?? Infinity) <= 1.5),
    t('CPU per session-hour ≤ 1.5× nginx (wss upstream)', `${fx(cpuTls)}×`, cpuTls <= 1.5),
    t('memory per session without the replay audio ≤ 1.5× nginx', `${fx(memory)}×`, memory <= 1.5),
    t(
      "replay audio held ≤ 1.1× its bytes (the gateway's external memory ÷ replay bytes)",
      `${fx(gw.externalPerReplayByte)}×`,
      (gw.externalPerReplayByte ?? Infinity) <= 1.1,
    ),
    t(
      "p99.9 added latency ≤ nginx's + 10 ms",
      unmeasured ?? `${fx(tail, 1)} ms over nginx`,
      unmeasured ? null : tail <= 10,
    ),
    t('20 ms-packet leg CPU ≤ 1.3× the 60 ms leg', `${fx(packets)}×`, packets <= 1.3),
    t('gateway idle RSS < 80 MB', `${mb(gw.idleRssBytes)} MB`, gw.idleRssBytes < 80e6),
    t(
      'sessions/core with p99 added < 5 ms ≥ 3× naive',
      unmeasured ?? `${fx(perCoreRatio)}×`,
      unmeasured ? null : perCoreRatio >= 3,
    ),
    t('PCM→Opus ≥ 3× one ffmpeg per stream (transcode.json)', `${fx(ours / ffmpeg)}×`, ours / ffmpeg >= 3),
    t('PCM→Opus ≥ 300 real-time streams/core (transcode.json)', `${Math.round(ours)}`, ours >= 300),
    t('final transcripts lost or repeated = 0 (all legs)', String(lostRepeated), lostRepeated === 0),
    t(
      "speech detector ≤ 10% of the gateway's CPU per session-hour (same run)",
      `${fx(detector * 100, 1)}%`,
      detector <= 0.1,
    ),
  ];
}

/** What the runtime costs before the gateway does anything: the uWS relay against nginx and the gateway. */
function floor(rows: ReturnType<typeof summarize>): string[] {
  const relay = rows.find((r) => r.name === 'uws relay (the floor of Node)');
  const keeping = rows.find((r) => r.name === 'uws relay keeping audio until finals');
  const gw = rows.find((r) => r.name === 'gateway');
  if (!relay || !gw) return [];
  const above = ratio(gw.cpuSecondsPerSessionHour, relay.cpuSecondsPerSessionHour);
  const kept = keeping
    ? ` Keeping each audio frame until the second final after it, as the replay keeps a piece, the relay costs ` +
      `${fx(keeping.cpuVsNginx)}× nginx's CPU and ${fx(keeping.memoryVsNginx)}× its memory per session, the audio it keeps included.`
    : '';
  return [
    '',
    `The floor of this stack: the uWS relay (the gateway's two sockets, frames passed as they come, nothing else) ` +
      `costs ${fx(relay.cpuVsNginx)}× nginx's CPU per session-hour and ${fx(relay.memoryVsNginx)}× its memory per session; ` +
      `the gateway costs ${fx(above)}× the relay's CPU.` +
      kept,
  ];
}

const isDirect = (l: { name: string }) => l.name.startsWith('direct');
/** A leg added latency is measured against (a direct leg, nginx) whose own p99 says the load generators
 *  or the upstream fell behind. */
const fellBehind = (l: { name: string }, p99Ms: number) =>
  (isDirect(l) || l.name === 'nginx') && p99Ms > REFERENCE_P99_MAX_MS;
/** Over this p99 (absolute, ms) a direct or nginx leg was not keeping up itself: latency added
 *  over it is not the proxy's (quiet runs: 2-16 ms; a saturated 2-core machine: seconds). */
const REFERENCE_P99_MAX_MS = 50;
const fx = (x: number | null | undefined, d = 2) =>
  x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(d);
const mb = (b: number) => (b / 1e6).toFixed(0);
const errs = (e: Record<string, number>) => Object.values(e).reduce((a, b) => a + b, 0);

function markdown(
  rows: ReturnType<typeof summarize>,
  t: ReturnType<typeof targets>,
  load: Load,
  full: boolean,
): string {
  const kb = (b: number | null) => (b === null ? '–' : (b / 1024).toFixed(0));
  const lines = [
    `${load.sessions} real-time sessions (${full ? 'full' : 'quick'}), ramp ${load.rampS} s, hold ${load.holdS} s: each session of a headline leg lasts from its start in the ramp to the end of the hold (${(load.holdS / 60).toFixed(1)}-${((load.rampS + load.holdS) / 60).toFixed(1)} min), one set-up; churn legs: 9 s sessions, each followed by a new one. ${availableParallelism()} cores shared by everything. ` +
      "CPU (over the hold; kernel % = its system-time share) and memory of the proxy's whole process tree from /proc; idle RSS before any session; KB per session = peak RSS over the hold above the RSS after a short warm-up, divided by the sessions; " +
      "replay KB = the gateway's audio kept for replays (speech_gateway_replay_buffered_bytes) per session a second before the hold ended; ext ÷ replay = the gateway's external (Buffer) memory growth over the replay bytes; heap KB = its V8 heap in use, growth per session (live objects and garbage not yet collected); file KB = the part of KB per session that is file-backed pages (code first run under load, not allocated memory); " +
      'added latency = piece sent → first upstream transcript whose end reaches into it, minus the same percentile of the direct legs pooled; ' +
      'sessions/core = 3600 / CPU s per session-hour, shown only when p99 added latency stayed under 5 ms at this load and the direct legs and nginx kept up (their p99 under 50 ms).',
    '',
    '| peer | accepted / started | errors | CPU s per session-h | × nginx | kernel % | KB per session | file KB | replay KB | KB without replay | × nginx | ext ÷ replay | heap KB | idle RSS MB | added p50 / p99 / p99.9 ms | sessions/core (p99 < 5 ms) | finals lost / repeated |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.accepted} / ${r.started} | ${errs(r.errors)} | ${fx(r.cpuSecondsPerSessionHour)} | ${fx(r.cpuVsNginx)} | ${r.kernelShare === null ? '–' : (r.kernelShare * 100).toFixed(0)} | ` +
        `${kb(r.bytesPerSession)} | ${kb(r.sharedBytesPerSession)} | ${kb(r.replayBytesPerSession)} | ${kb(r.bytesWithoutReplay)} | ${fx(r.memoryVsNginx)} | ${fx(r.externalPerReplayByte)} | ${kb(r.heapBytesPerSession)} | ${isDirect(r) ? '–' : mb(r.idleRssBytes)} | ` +
        `${isDirect(r) ? `(${fx(r.latencyMs.p50, 1)} / ${fx(r.latencyMs.p99, 1)} / ${fx(r.latencyMs['p99.9'], 1)} absolute)` : PCTS.map((p) => fx(r.addedLatencyMs[`p${p}`], 1)).join(' / ')} | ` +
        `${r.sessionsPerCoreP99Under5ms === null ? '–' : Math.round(r.sessionsPerCoreP99Under5ms)} | ${r.lost} / ${r.repeated} |`,
    ),
    '',
    ...rows
      .filter((r) => r.http)
      .flatMap((r) => [
        `HTTP surfaces under autocannon (10 connections) during "${r.name}":`,
        '',
        '| path | requests/s | p99 ms | non-2xx | errors |',
        '|---|---|---|---|---|',
        ...r.http!.map((h) => `| ${h.path} | ${h.requestsPerS.toFixed(0)} | ${h.p99Ms} | ${h.non2xx} | ${h.errors} |`),
        '',
      ]),
    '| target | measured | |',
    '|---|---|---|',
    ...t.map(
      (x) => `| ${x.target} | ${x.measured} | ${x.met === null ? 'not measured' : x.met ? 'met' : '**missed**'} |`,
    ),
    ...floor(rows),
  ];
  return lines.join('\n') + '\n';
}

export function report(legs: Leg[], load: Load, full: boolean, runSeconds: number): void {
  const rows = summarize(legs);
  const t = targets(rows);
  const md = markdown(rows, t, load, full);
  mkdirSync(results, { recursive: true });
  const name = full ? 'load-full' : 'load'; // the quick and the full run each keep their latest
  writeFileSync(
    new URL(`${name}.json`, results),
    JSON.stringify(
      {
        bench: 'load/load',
        date: new Date().toISOString(),
        cores: availableParallelism(),
        mode: full ? 'full' : 'quick',
        load,
        runSeconds,
        peers: rows,
        targets: t,
      },
      null,
      2,
    ) + '\n',
  );
  writeFileSync(new URL(`${name}.md`, results), md);
  console.log(md + `(run took ${runSeconds.toFixed(0)} s)`);
}
