// `npm run bench -- speech-detector`: the speech detector (src/audio/speech/) on labelled audio made
// here (test/audio/speech/labelled.ts): the fixture's speech, the same with silences inserted, with
// room noise under it, silence, room noise and music, each encoded as clients send it (ffmpeg's
// libopus at Chromium's setting, at VoIP settings, at the gateway transcoder's setting), recorded by
// a real Chromium's MediaRecorder through its fake microphone, and as PCM for the WebRTC VAD. Prints
// speech found against the truth, false speech on what is not speech, and the detector's CPU per
// audio second; writes bench/results/speech-detector.md.
//
// BENCH_CHROMIUM=0 leaves the browser recordings out (they take about 2.5 minutes of real time).
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as L from '../../test/audio/speech/labelled.js';
import { detectPackets, score, type Score } from '../../test/audio/speech/score.js';
import { fixtureRecording, recordInChromium } from './lib/chromium.js';
import { fvadClip } from './lib/fvad.js';
import { cpuPerAudioSecond } from './lib/cpu.js';
import { sizeBaseline } from './lib/size-baseline.js';
import type { SpeechDetectorOptions } from '../../src/audio/index.js';

// Tuning knobs: BENCH_CPU=0 skips the CPU timing, BENCH_FVAD=0 the PCM path, BENCH_ENCODINGS=0,2
// picks encodings, SPEECH_OPTIONS='{"marginDb":9}' overrides the detector's defaults.
const timing = process.env.BENCH_CPU !== '0';
const withFvad = process.env.BENCH_FVAD !== '0';
const pickedEncodings = process.env.BENCH_ENCODINGS?.split(',').map(Number);
const options = JSON.parse(process.env.SPEECH_OPTIONS ?? '{}') as SpeechDetectorOptions;
const here = fileURLToPath(new URL('.', import.meta.url));
const work = join(here, '../../.tmp/speech-detector');
const resultsFile = join(here, '../results/speech-detector.md');
mkdirSync(work, { recursive: true });

interface Row {
  input: string;
  clip: string;
  kind: L.ClipKind;
  s: Score;
  cpuUs?: number;
}

async function clips(): Promise<L.Clip[]> {
  const speech = await L.fixtureSpeech();
  const gaps = L.withSilences(speech, [2, 5, 10, 30, 60]);
  return [
    speech,
    gaps,
    L.over(gaps, L.noise('pink', -50, 60, 11)),
    L.over(gaps, L.noise('pink', -35, 60, 12)),
    L.silence(60),
    L.noise('pink', -50, 60, 1),
    L.noise('pink', -35, 60, 2),
    L.noise('brown', -50, 60, 3),
    L.noise('brown', -35, 60, 4),
    L.music('chord', -20, 30),
    L.music('progression', -20, 32),
    L.music('melody', -20, 30),
  ];
}

async function encoded(all: L.Clip[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const [ci, clip] of all.entries()) {
    const wav = join(work, `clip-${ci}.wav`);
    L.writeWav(clip, wav);
    for (const [ei, e] of L.ENCODINGS.entries()) {
      if (pickedEncodings && !pickedEncodings.includes(ei)) continue;
      const data = await L.encode(wav, e, join(work, `clip-${ci}-${ei}.${e.container}`));
      const packets = await L.opusPackets(data, e.container);
      const d = detectPackets(packets, options);
      const s = score(clip.speech, d.stretches, d.seconds, d.detector.unknownSeconds);
      rows.push({
        input: e.name,
        clip: clip.name,
        kind: clip.kind,
        s,
        cpuUs: timing ? cpuPerAudioSecond(packets, d.seconds) : undefined,
      });
      if (ei === 0) rows.push(sizeRow(`${e.name}: packet sizes alone`, clip, packets));
    }
    if (withFvad)
      rows.push({
        input: 'PCM 16 kHz, WebRTC VAD (fvad, mode 3)',
        clip: clip.name,
        kind: clip.kind,
        ...(await fvadClip(wav, clip)),
      });
  }
  return rows;
}

function sizeRow(input: string, clip: L.Clip, packets: Uint8Array[], lag = 0): Row {
  const b = sizeBaseline(packets);
  return { input, clip: clip.name, kind: clip.kind, s: score(clip.speech, b.stretches, b.seconds, 0, -lag) };
}

async function chromium(all: L.Clip[]): Promise<Row[]> {
  const fixtureRec = await fixtureRecording(all[0], work);
  const fixtureRows: Row[] = [
    sizeRow(
      "Chromium's MediaRecorder, the fixture's recording: packet sizes alone",
      fixtureRec.clip,
      fixtureRec.packets,
      fixtureRec.lag,
    ),
    {
      input: "Chromium's MediaRecorder, the fixture's recording (CELT 60 ms)",
      clip: fixtureRec.clip.name,
      kind: 'speech',
      s: scoreRec(fixtureRec),
    },
  ];
  if (process.env.BENCH_CHROMIUM === '0') return fixtureRows;
  // The real browser on the clips a browser client most often sends: speech with pauses, in a quiet
  // and a noisy room, a quiet room alone, music.
  const picked = [all[1], all[2], all[3], all[4], all[5], all[6], all[10]];
  const recs = await recordInChromium(picked, work);
  return fixtureRows.concat(
    recs.flatMap((r) => {
      const d = detectPackets(r.packets, options);
      const s = score(r.clip.speech, d.stretches, d.seconds, d.detector.unknownSeconds, -r.lag);
      const size = sizeRow("Chromium's MediaRecorder: packet sizes alone", r.clip, r.packets, r.lag);
      return [
        size,
        {
          input: "Chromium's MediaRecorder (CELT 60 ms)",
          clip: r.clip.name,
          kind: r.clip.kind,
          s,
          cpuUs: timing ? cpuPerAudioSecond(r.packets, d.seconds) : undefined,
        },
      ];
    }),
  );
}

function scoreRec(r: { clip: L.Clip; packets: Uint8Array[]; lag: number }): Score {
  const d = detectPackets(r.packets, options);
  return score(r.clip.speech, d.stretches, d.seconds, d.detector.unknownSeconds, -r.lag);
}

const pct = (a: number, b: number) => (b > 0 ? `${((100 * a) / b).toFixed(1)}%` : '–');
const sec = (x: number) => x.toFixed(1);

function table(rows: Row[]): string {
  const head =
    '| input | clip | true speech s | found s | found | not speech s | false speech s | false | detected s | CPU µs per audio s |';
  const lines = rows.map(
    (r) =>
      `| ${r.input} | ${r.clip} | ${sec(r.s.truth)} | ${sec(r.s.found)} | ${pct(r.s.found, r.s.truth)} | ${sec(r.s.quiet)} | ${sec(r.s.falseSpeech)} | ${pct(r.s.falseSpeech, r.s.quiet)} | ${sec(r.s.detected)} | ${r.cpuUs === undefined ? '–' : r.cpuUs.toFixed(1)} |`,
  );
  return [head, head.replace(/[^|]+/g, '---'), ...lines].join('\n');
}

/** Per input: speech found over all speech clips, false speech over all quiet time. */
function summary(rows: Row[]): string {
  const inputs = [...new Set(rows.map((r) => r.input))];
  const head =
    '| input | found (of true speech) | false on silence + noise | false on music | CPU µs per audio s (median) |';
  const lines = inputs.map((input) => {
    const rs = rows.filter((r) => r.input === input);
    const sum = (f: (r: Row) => number, k?: (r: Row) => boolean) =>
      rs.filter(k ?? (() => true)).reduce((n, r) => n + f(r), 0);
    const quiet = (r: Row) => r.kind !== 'music';
    const cpu = rs
      .map((r) => r.cpuUs)
      .filter((x): x is number => x !== undefined)
      .sort((a, b) => a - b);
    return `| ${input} | ${pct(
      sum((r) => r.s.found),
      sum((r) => r.s.truth),
    )} | ${pct(
      sum((r) => r.s.falseSpeech, quiet),
      sum((r) => r.s.quiet, quiet),
    )} | ${pct(
      sum(
        (r) => r.s.falseSpeech,
        (r) => r.kind === 'music',
      ),
      sum(
        (r) => r.s.quiet,
        (r) => r.kind === 'music',
      ),
    )} | ${cpu.length ? cpu[cpu.length >> 1].toFixed(1) : '–'} |`;
  });
  return [head, head.replace(/[^|]+/g, '---'), ...lines].join('\n');
}

const load = loadavg()[0];
const all = await clips();
const rows = [...(await encoded(all)), ...(await chromium(all))];
const loadAfter = loadavg()[0];
const out = [
  '# Speech detector on labelled audio',
  '',
  `Made by \`npm run bench -- speech-detector\` on ${new Date().toISOString().slice(0, 10)}; load average ${load.toFixed(1)} at the start, ${loadAfter.toFixed(1)} at the end${Math.max(load, loadAfter) > 3 ? ' (a loaded machine: the CPU figures are high)' : ''}. Targets: found ≥ 95% of true speech, false ≤ 5% of silence and noise, CPU ≤ 40 µs per audio second.`,
  '',
  summary(rows),
  '',
  table(rows),
  '',
].join('\n');
console.log(out);
writeFileSync(resultsFile, out);
