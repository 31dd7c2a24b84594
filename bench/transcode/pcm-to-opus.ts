// PCM → Ogg/Opus: real-time streams per core for our encoder (inline and worker pool) against one
// ffmpeg/libopus process per stream at the same settings (bitrate, application, complexity, frame
// size), whether the speech survives (decoded duration, log-mel distance and SNR against the
// input, for both), plus push latency and event-loop delay under paced load (what other sessions
// on the same process feel). Ratios matter, not absolute numbers: the machine is shared, so the
// variants take turns in each round and the median round counts.
// Run: npx tsx bench/transcode/pcm-to-opus.ts  [BENCH_STREAMS=8 BENCH_ROUNDS=5 BENCH_PACED_STREAMS=300]
import { spawn } from 'node:child_process';
import { readFileSync, mkdirSync, writeFileSync, mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  createPcmToOpus,
  createEncoderPool,
  type EncoderPool,
  type TranscodeMode,
} from '../../src/audio/transcode/index.js';
import { defaultBitrate, ENCODER_SETTINGS } from '../../src/audio/transcode/stream-encoder.js';
import { decodedSeconds48k, decodeTo16kMono } from '../../test/audio-transcode/ogg-check.js';
import { SPEECH_BOUNDS, speechDistance } from '../../test/audio-transcode/speech-check.js';

const FIXTURE = new URL('../../test/fixtures/dictation-16k-s16le.pcm', import.meta.url);
const RESULTS = new URL('../results/transcode.json', import.meta.url);
const pcm = readFileSync(FIXTURE);
const CHUNK = (16000 * 2) / 4; // 250 ms of 16 kHz mono s16le
const chunks: Buffer[] = [];
for (let i = 0; i < pcm.length; i += CHUNK) chunks.push(pcm.subarray(i, i + CHUNK));
const mediaPerStream = pcm.length / 32000;
const STREAMS = Number(process.env.BENCH_STREAMS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PACED_STREAMS = Number(process.env.BENCH_PACED_STREAMS ?? 300);
const PACED_SECONDS = 6;
const FORMAT = { sampleRate: 16000, channels: 1, encoding: 's16le' } as const;
const BITRATE = defaultBitrate(FORMAT.channels);
const FFMPEG_ARGS = [
  '-c:a',
  'libopus',
  '-b:a',
  String(BITRATE),
  '-application',
  ENCODER_SETTINGS.application === 'restricted-lowdelay' ? 'lowdelay' : 'voip',
  '-compression_level',
  String(ENCODER_SETTINGS.complexity),
  '-frame_duration',
  String(ENCODER_SETTINGS.frameMs),
];

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};
interface Flat {
  media: number;
  cpu: number;
  wall: number;
  pushP50Ms?: number;
  pushP99Ms?: number;
  ogg: Buffer;
}

/** N streams pushed as fast as possible; CPU of this process (all threads, workers included). */
async function oursFlat(mode: TranscodeMode, pool?: EncoderPool): Promise<Flat> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const lat: number[] = [];
  const outs = await Promise.all(
    Array.from({ length: STREAMS }, async () => {
      const t = createPcmToOpus(FORMAT, { mode, pool });
      const out: Buffer[] = [];
      for (const c of chunks) {
        const s = performance.now();
        out.push((await t.push(c)).data);
        lat.push(performance.now() - s);
      }
      out.push((await t.end()).data);
      return Buffer.concat(out);
    }),
  );
  const cpu = cpuSeconds(process.cpuUsage(cpu0));
  return {
    media: STREAMS * mediaPerStream,
    cpu,
    wall: (performance.now() - t0) / 1000,
    pushP50Ms: pct(lat, 50),
    pushP99Ms: pct(lat, 99),
    ogg: outs[0],
  };
}

/** One ffmpeg per stream; CPU from bash's `times` (children of the shell = the ffmpeg process). */
function ffmpegStream(): Promise<{ cpu: number; ogg: Buffer }> {
  const cmd = `ffmpeg -v error -f s16le -ar 16000 -ac 1 -i pipe:0 ${FFMPEG_ARGS.join(' ')} -f ogg pipe:1; times >&2`;
  const p = spawn('bash', ['-c', cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  const out: Buffer[] = [];
  p.stderr.on('data', (d) => {
    err += d;
  });
  p.stdout.on('data', (d: Buffer) => out.push(d));
  return new Promise((resolve, reject) => {
    p.on('error', reject);
    p.on('close', () => {
      const m = [...err.matchAll(/(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s/g)].at(-1); // last line: children
      if (!m) return reject(new Error(`no times output: ${err}`));
      resolve({ cpu: Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4]), ogg: Buffer.concat(out) });
    });
    (async () => {
      for (const c of chunks) if (!p.stdin.write(c)) await new Promise((r) => p.stdin.once('drain', r));
      p.stdin.end();
    })().catch(reject);
  });
}

async function ffmpegFlat(): Promise<Flat> {
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: STREAMS }, ffmpegStream));
  return {
    media: STREAMS * mediaPerStream,
    cpu: runs.reduce((a, r) => a + r.cpu, 0),
    wall: (performance.now() - t0) / 1000,
    ogg: runs[0].ogg,
  };
}

/** Many streams paced at real time: push latency and event-loop delay seen by everyone else. */
async function oursPaced(mode: TranscodeMode, pool?: EncoderPool) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  h.enable();
  const steps = PACED_SECONDS * 4;
  await Promise.all(
    Array.from({ length: PACED_STREAMS }, async (_, i) => {
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
    }),
  );
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

/** Decoded duration and distance to the input of one stream's Ogg/Opus (ffmpeg decodes it). */
async function speech(dir: string, name: string, ogg: Buffer) {
  const file = join(dir, `${name}.ogg`);
  writeFileSync(file, ogg);
  const decodedSeconds = await decodedSeconds48k(file);
  const d = speechDistance(pcm, (await decodeTo16kMono(file)).pcm);
  const ok =
    Math.abs(decodedSeconds - mediaPerStream) < 0.04 &&
    d.logMelDb <= SPEECH_BOUNDS.maxLogMelDb &&
    d.snrDb >= SPEECH_BOUNDS.minSnrDb;
  return { decodedSeconds, kbps: (ogg.length * 8) / mediaPerStream / 1000, ...d, ok };
}

async function main() {
  const cores = availableParallelism();
  const pool = createEncoderPool({ threads: cores });
  // Warm up: worker start-up, wasm and libopus init are not what we measure.
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      const t = createPcmToOpus(FORMAT, { pool });
      await t.push(chunks[0]);
      await t.end();
    }),
  );
  {
    const t = createPcmToOpus(FORMAT, { mode: 'inline' });
    await t.push(chunks[0]);
    await t.end();
  }

  const rounds: Record<'inline' | 'pool' | 'ffmpeg', Flat[]> = { inline: [], pool: [], ffmpeg: [] };
  for (let r = 0; r < ROUNDS; r++) {
    rounds.inline.push(await oursFlat('inline'));
    rounds.pool.push(await oursFlat('pool', pool));
    rounds.ffmpeg.push(await ffmpegFlat());
  }
  const median = (xs: Flat[]) => [...xs].sort((a, b) => a.cpu - b.cpu)[Math.floor(xs.length / 2)];
  const [inline, pooled, ffmpeg] = [median(rounds.inline), median(rounds.pool), median(rounds.ffmpeg)];
  const pacedInline = await oursPaced('inline');
  const pacedPool = await oursPaced('pool', pool);
  await pool.close();

  const dir = mkdtempSync(join(tmpdir(), 'bench-transcode-'));
  const speechCheck = {
    bounds: SPEECH_BOUNDS,
    ours: await speech(dir, 'ours', inline.ogg),
    ffmpeg: await speech(dir, 'ffmpeg', ffmpeg.ogg),
  };

  const perCore = (r: { media: number; cpu: number }) => r.media / r.cpu;
  const rows = [
    { variant: 'ours, inline', ...inline, streamsPerCore: perCore(inline) },
    { variant: 'ours, worker pool', ...pooled, streamsPerCore: perCore(pooled) },
    { variant: 'ffmpeg per stream', ...ffmpeg, streamsPerCore: perCore(ffmpeg) },
  ].map(({ ogg: _ogg, ...r }) => r);
  const settings = { bitrate: BITRATE, ...ENCODER_SETTINGS, ffmpeg: FFMPEG_ARGS.join(' ') };
  console.log(
    `PCM 16 kHz mono → Ogg/Opus, ${JSON.stringify(settings)}; ${STREAMS} concurrent streams of ${mediaPerStream.toFixed(1)} s, 250 ms pushes, ${cores} cores, median of ${ROUNDS} rounds`,
  );
  console.table(
    rows.map((r) => ({
      variant: r.variant,
      'media s': r.media.toFixed(0),
      'cpu s': r.cpu.toFixed(2),
      'wall s': r.wall.toFixed(2),
      'real-time streams/core': r.streamsPerCore.toFixed(0),
    })),
  );
  const ratios = {
    inlineVsFfmpeg: perCore(inline) / perCore(ffmpeg),
    poolVsFfmpeg: perCore(pooled) / perCore(ffmpeg),
    poolVsInline: perCore(pooled) / perCore(inline),
  };
  console.log(
    'ratios (streams per core):',
    Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, v.toFixed(2)])),
  );
  console.log(
    `speech kept (log-mel distance ≤ ${SPEECH_BOUNDS.maxLogMelDb} dB, SNR ≥ ${SPEECH_BOUNDS.minSnrDb} dB, decoded duration within 40 ms of ${mediaPerStream.toFixed(3)} s):`,
  );
  console.table(
    Object.fromEntries(
      (['ours', 'ffmpeg'] as const).map((k) => {
        const s = speechCheck[k];
        return [
          k,
          {
            'decoded s': s.decodedSeconds.toFixed(3),
            'Ogg kb/s': s.kbps.toFixed(1),
            'log-mel dB': s.logMelDb.toFixed(2),
            'SNR dB': s.snrDb.toFixed(1),
            ok: s.ok,
          },
        ];
      }),
    ),
  );
  console.log(`paced: ${PACED_STREAMS} streams at real time for ${PACED_SECONDS} s`);
  console.table(
    [
      { mode: 'inline', ...pacedInline },
      { mode: 'pool', ...pacedPool },
    ].map((r) => ({
      mode: r.mode,
      'push p50 ms': r.pushP50Ms.toFixed(2),
      'push p99 ms': r.pushP99Ms.toFixed(2),
      'event-loop delay p99 ms': r.eventLoopDelayP99Ms.toFixed(2),
      'event-loop delay max ms': r.eventLoopDelayMaxMs.toFixed(2),
      'cpu ms per media s': (r.cpuPerMediaSecond * 1000).toFixed(2),
    })),
  );

  mkdirSync(new URL('.', RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    JSON.stringify(
      {
        bench: 'transcode/pcm-to-opus',
        date: new Date().toISOString(),
        cores,
        streams: STREAMS,
        rounds: ROUNDS,
        mediaSecondsPerStream: mediaPerStream,
        settings,
        flat: rows,
        ratios,
        speech: speechCheck,
        paced: { inline: pacedInline, pool: pacedPool },
      },
      null,
      2,
    ) + '\n',
  );
  console.log(`wrote ${RESULTS.pathname}`);
  if (!speechCheck.ours.ok) process.exitCode = 1;
}

await main();
