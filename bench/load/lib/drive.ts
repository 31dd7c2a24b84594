// Runs one leg: forks the load-generator processes against a URL, samples the proxy's process tree
// (CPU and peak RSS over the hold window, every peer alike) and merges the workers' results.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { treeCpu, treeRss, treeSharedRss } from './proc.js';

const worker = fileURLToPath(new URL('./worker.mjs', import.meta.url));

export interface Audio {
  config: object;
  pieces: Array<{ file: string; start: number; end: number }>;
  mediaEnds: number[];
  tolerance: number;
}
export interface Load {
  sessions: number;
  workers: number;
  rampS: number;
  holdS: number;
}
export interface WorkerResult {
  started: number;
  accepted: number;
  completed: number;
  errors: Record<string, number>;
  latencies: number[];
  lost: number;
  repeated: number;
  finals: number;
  notes: string[];
}

/** The gateway's own view of its memory, from its /metrics (admin port). */
export interface Gauges {
  replayBytes: number;
  externalBytes: number;
  heapUsedBytes: number;
  /** seconds its speech detector has run so far */
  detectorSeconds: number;
}

async function gauges(adminPort: number): Promise<Gauges | null> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    return {
      replayBytes: read('speech_gateway_replay_buffered_bytes'),
      externalBytes: read('nodejs_external_memory_bytes'),
      heapUsedBytes: read('nodejs_heap_size_used_bytes'),
      detectorSeconds: read('speech_gateway_speech_detector_seconds_total'),
    };
  } catch {
    return null;
  }
}

export async function drive(
  url: string,
  audio: Audio,
  load: Load,
  proxyPid: number | null,
  during?: (holdFrom: number, stopAt: number) => Promise<unknown>,
  adminPort?: number,
) {
  const startAt = Date.now() + 500;
  const holdFrom = startAt + load.rampS * 1000;
  const stopAt = holdFrom + load.holdS * 1000;
  // Baseline: the RSS after the warm-up leg, before this one. Peak: sampled over the hold only, when
  // every session is open (ramp and teardown would measure connects and closes, not sessions).
  const baselineRss = proxyPid ? treeRss(proxyPid) : 0;
  const baselineShared = proxyPid ? treeSharedRss(proxyPid) : 0;
  let peakRss = baselineRss,
    sharedAtPeak = baselineShared;
  const sample = () => {
    if (!proxyPid || Date.now() < holdFrom) return;
    const rss = treeRss(proxyPid);
    if (rss > peakRss) [peakRss, sharedAtPeak] = [rss, treeSharedRss(proxyPid)];
  };
  const sampler = setInterval(sample, 200);
  let cpuAtHold = { user: 0, system: 0 };
  let cpuAtStop = { user: 0, system: 0 };
  const marks = [
    setTimeout(() => {
      if (proxyPid) cpuAtHold = treeCpu(proxyPid);
    }, holdFrom - Date.now()),
    setTimeout(() => {
      if (proxyPid) cpuAtStop = treeCpu(proxyPid);
      sample();
      clearInterval(sampler);
    }, stopAt - Date.now()),
  ];
  // The gateway's replay audio and external memory: before the leg, and a second before its end (every
  // session still open).
  const gaugesBefore = adminPort ? await gauges(adminPort) : null;
  const gaugesAt = (t: number) =>
    adminPort
      ? new Promise<Gauges | null>((res) => setTimeout(() => res(gauges(adminPort)), t - Date.now()))
      : Promise.resolve(null);
  const gaugesAtHold = gaugesAt(holdFrom);
  const gaugesAtPeak = gaugesAt(stopAt - 1000);
  const per = Math.ceil(load.sessions / load.workers);
  const results = await Promise.all([
    ...Array.from({ length: load.workers }, (_, w) =>
      runWorker({
        url,
        ...audio,
        sessions: Math.min(per, load.sessions - w * per),
        offset: w * per,
        total: load.sessions,
        startAt,
        holdFrom,
        stopAt,
      }),
    ),
    during?.(holdFrom, stopAt),
  ]);
  clearInterval(sampler);
  marks.forEach(clearTimeout);
  const merged = merge(results.slice(0, load.workers) as WorkerResult[]);
  const peak = await gaugesAtPeak;
  const hold = await gaugesAtHold;
  const systemHold = cpuAtStop.system - cpuAtHold.system;
  const cpuHold = cpuAtStop.user - cpuAtHold.user + systemHold;
  return {
    ...merged,
    baselineRssBytes: baselineRss,
    peakRssBytes: peakRss,
    cpuHoldSeconds: cpuHold,
    kernelShare: cpuHold > 0 ? systemHold / cpuHold : null,
    cpuSecondsPerSessionHour: proxyPid ? cpuHold / ((load.sessions * load.holdS) / 3600) : null,
    bytesPerSession: proxyPid ? (peakRss - baselineRss) / load.sessions : null,
    sharedBytesPerSession: proxyPid ? (sharedAtPeak - baselineShared) / load.sessions : null,
    replayBytesPerSession: peak ? peak.replayBytes / load.sessions : null,
    externalBytesPerSession:
      peak && gaugesBefore ? (peak.externalBytes - gaugesBefore.externalBytes) / load.sessions : null,
    heapBytesPerSession:
      peak && gaugesBefore ? (peak.heapUsedBytes - gaugesBefore.heapUsedBytes) / load.sessions : null,
    // The detector's seconds over the hold (to a second before its end), per session-hour.
    detectorSecondsPerSessionHour:
      peak && hold && Number.isFinite(peak.detectorSeconds)
        ? (peak.detectorSeconds - hold.detectorSeconds) / ((load.sessions * (stopAt - 1000 - holdFrom)) / 1000 / 3600)
        : null,
    during: results[load.workers],
  };
}

function runWorker(job: object): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    const child = fork(worker, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    child.once('message', (m) => resolve(m as WorkerResult));
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`load worker exited ${code}`));
    });
    child.send(job);
  });
}

function merge(rs: WorkerResult[]): WorkerResult {
  const out: WorkerResult = {
    started: 0,
    accepted: 0,
    completed: 0,
    errors: {},
    latencies: [],
    lost: 0,
    repeated: 0,
    finals: 0,
    notes: [],
  };
  for (const r of rs) {
    for (const k of ['started', 'accepted', 'completed', 'lost', 'repeated', 'finals'] as const) out[k] += r[k];
    for (const [k, n] of Object.entries(r.errors)) out.errors[k] = (out.errors[k] ?? 0) + n;
    for (const l of r.latencies) out.latencies.push(l);
    out.notes.push(...r.notes.slice(0, 5 - out.notes.length));
  }
  return out;
}
