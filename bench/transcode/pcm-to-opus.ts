// PCM → Ogg/Opus: real-time streams per core for our encoder (inline and worker pool) against one
// ffmpeg/libopus process per stream, plus push latency and event-loop delay under paced load
// (what other sessions on the same process feel). Ratios matter, not absolute numbers: the
// machine is shared. Run: npx tsx bench/transcode/pcm-to-opus.ts  [BENCH_STREAMS=8 BENCH_PACED_STREAMS=48]
import { spawn } from 'node:child_process';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createPcmToOpus, createEncoderPool, type EncoderPool, type TranscodeMode } from '../../src/audio/transcode/index.js';

const FIXTURE = new URL('../../test/fixtures/dictation-16k-s16le.pcm', import.meta.url);
const RESULTS = new URL('../results/transcode.json', import.meta.url);
const pcm = readFileSync(FIXTURE);
const CHUNK = 16000 * 2 / 4; // 250 ms of 16 kHz mono s16le
const chunks: Buffer[] = [];
for (let i = 0; i < pcm.length; i += CHUNK) chunks.push(pcm.subarray(i, i + CHUNK));
const mediaPerStream = pcm.length / 32000;
const STREAMS = Number(process.env.BENCH_STREAMS ?? 8);
const PACED_STREAMS = Number(process.env.BENCH_PACED_STREAMS ?? 48);
const PACED_SECONDS = 6;
const FORMAT = { sampleRate: 16000, channels: 1, encoding: 's16le' } as const;

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};

/** N streams pushed as fast as possible; CPU of this process (all threads, workers included). */
async function oursFlat(mode: TranscodeMode, pool?: EncoderPool) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const lat: number[] = [];
  await Promise.all(Array.from({ length: STREAMS }, async () => {
    const t = createPcmToOpus(FORMAT, { mode, pool });
    for (const c of chunks) {
      const s = performance.now();
      await t.push(c);
      lat.push(performance.now() - s);
    }
    await t.end();
  }));
  const cpu = cpuSeconds(process.cpuUsage(cpu0));
  return { media: STREAMS * mediaPerStream, cpu, wall: (performance.now() - t0) / 1000, pushP50Ms: pct(lat, 50), pushP99Ms: pct(lat, 99) };
}

/** One ffmpeg per stream; CPU from bash's `times` (children of the shell = the ffmpeg process). */
function ffmpegStream(): Promise<number> {
  const cmd = 'ffmpeg -v error -f s16le -ar 16000 -ac 1 -i pipe:0 -c:a libopus -b:a 24k -f ogg pipe:1; times >&2';
  const p = spawn('bash', ['-c', cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  p.stdout.resume();
  return new Promise((resolve, reject) => {
    p.on('error', reject);
    p.on('close', () => {
      const m = [...err.matchAll(/(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s/g)].at(-1); // last line: children
      if (!m) return reject(new Error(`no times output: ${err}`));
      resolve(Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4]));
    });
    (async () => {
      for (const c of chunks) if (!p.stdin.write(c)) await new Promise((r) => p.stdin.once('drain', r));
      p.stdin.end();
    })().catch(reject);
  });
}

async function ffmpegFlat() {
  const t0 = performance.now();
  const cpus = await Promise.all(Array.from({ length: STREAMS }, ffmpegStream));
  return { media: STREAMS * mediaPerStream, cpu: cpus.reduce((a, b) => a + b, 0), wall: (performance.now() - t0) / 1000 };
}

/** Many streams paced at real time: push latency and event-loop delay seen by everyone else. */
async function oursPaced(mode: TranscodeMode, pool?: EncoderPool) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  h.enable();
  const steps = PACED_SECONDS * 4;
  await Promise.all(Array.from({ length: PACED_STREAMS }, async (_, i) => {
    const t = createPcmToOpus(FORMAT, { mode, pool });
    await new Promise((r) => setTimeout(r, (250 * i) / PACED_STREAMS)); // stagger
    const start = performance.now();
    for (let k = 0; k < steps; k++) {
      const due = start + k * 250;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const s = performance.now();
      await t.push(chunks[k % chunks.length]);
      lat.push(performance.now() - s);
    }
    await t.end();
  }));
  h.disable();
  const cpu = cpuSeconds(process.cpuUsage(cpu0));
  return {
    streams: PACED_STREAMS,
    pushP50Ms: pct(lat, 50),
    pushP99Ms: pct(lat, 99),
    eventLoopDelayP99Ms: h.percentile(99) / 1e6,
    eventLoopDelayMaxMs: h.max / 1e6,
    cpuPerMediaSecond: cpu / (PACED_STREAMS * PACED_SECONDS),
  };
}

async function main() {
  const cores = availableParallelism();
  const pool = createEncoderPool({ threads: cores });
  // Warm up: worker start-up, wasm and libopus init are not what we measure.
  await Promise.all([0, 1, 2, 3].map(async () => { const t = createPcmToOpus(FORMAT, { pool }); await t.push(chunks[0]); await t.end(); }));
  { const t = createPcmToOpus(FORMAT, { mode: 'inline' }); await t.push(chunks[0]); await t.end(); }

  const inline = await oursFlat('inline');
  const pooled = await oursFlat('pool', pool);
  const ffmpeg = await ffmpegFlat();
  const pacedInline = await oursPaced('inline');
  const pacedPool = await oursPaced('pool', pool);
  await pool.close();

  const perCore = (r: { media: number; cpu: number }) => r.media / r.cpu;
  const rows = [
    { variant: 'ours, inline', ...inline, streamsPerCore: perCore(inline) },
    { variant: 'ours, worker pool', ...pooled, streamsPerCore: perCore(pooled) },
    { variant: 'ffmpeg per stream', ...ffmpeg, streamsPerCore: perCore(ffmpeg) },
  ];
  console.log(`PCM 16 kHz mono → Ogg/Opus 24 kb/s, ${STREAMS} concurrent streams of ${mediaPerStream.toFixed(1)} s, 250 ms pushes, ${cores} cores`);
  console.table(rows.map((r) => ({
    variant: r.variant, 'media s': r.media.toFixed(0), 'cpu s': r.cpu.toFixed(2), 'wall s': r.wall.toFixed(2),
    'real-time streams/core': r.streamsPerCore.toFixed(0),
  })));
  const ratios = { inlineVsFfmpeg: perCore(inline) / perCore(ffmpeg), poolVsFfmpeg: perCore(pooled) / perCore(ffmpeg), poolVsInline: perCore(pooled) / perCore(inline) };
  console.log('ratios (streams per core):', Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, v.toFixed(2)])));
  console.log(`paced: ${PACED_STREAMS} streams at real time for ${PACED_SECONDS} s`);
  console.table([{ mode: 'inline', ...pacedInline }, { mode: 'pool', ...pacedPool }].map((r) => ({
    mode: r.mode, 'push p50 ms': r.pushP50Ms.toFixed(2), 'push p99 ms': r.pushP99Ms.toFixed(2),
    'event-loop delay p99 ms': r.eventLoopDelayP99Ms.toFixed(2), 'event-loop delay max ms': r.eventLoopDelayMaxMs.toFixed(2),
  })));

  mkdirSync(new URL('.', RESULTS), { recursive: true });
  writeFileSync(RESULTS, JSON.stringify({
    bench: 'transcode/pcm-to-opus', date: new Date().toISOString(), cores, streams: STREAMS, mediaSecondsPerStream: mediaPerStream,
    flat: rows, ratios, paced: { inline: pacedInline, pool: pacedPool },
  }, null, 2) + '\n');
  console.log(`wrote ${RESULTS.pathname}`);
}

await main();
