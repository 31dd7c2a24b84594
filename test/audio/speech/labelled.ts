// Labelled audio for the speech detector, made when a test or the benchmark runs (nothing binary is
// committed): the fixture's speech, the same speech with silences inserted, room noise, music, each
// as 48 kHz mono samples with the truth (where the speech is), then encoded the ways clients send.
//
// Truth: the fixture's speech is synthetic with digital silence between words and sentences, so a
// 10 ms frame of the clean audio (the 16 kHz WAV; with silences inserted, the clean result, before
// any noise is added) above -55 dBFS is speech, an energy threshold on the clean source; pauses under
// 1 s inside it count as speech (a speaker's pause, which a detector's bridge spans on purpose).
// Inserted silence, noise and music are exact: never speech.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import prism from 'prism-media';
import { FIXTURES, prng } from '../../support/fixtures.js';

const run = promisify(execFile);
export const RATE = 48000;

export type ClipKind = 'speech' | 'silence' | 'noise' | 'music';

export interface Clip {
  name: string;
  kind: ClipKind;
  /** 48 kHz mono samples in [-1, 1]. */
  samples: Float32Array;
  /** Speech intervals [start, end) in seconds, sorted. */
  speech: Array<[number, number]>;
}

/** ffmpeg decodes a file to mono float samples at `rate`. */
export async function decodeFloat(file: string, rate = RATE): Promise<Float32Array> {
  const { stdout } = await run(
    'ffmpeg',
    ['-v', 'error', '-i', file, '-f', 'f32le', '-ac', '1', '-ar', String(rate), 'pipe:1'],
    {
      encoding: 'buffer',
      maxBuffer: 1 << 30,
    },
  );
  return new Float32Array(stdout.buffer, stdout.byteOffset, stdout.length / 4);
}

/** Speech intervals of clean audio: 10 ms frames above -55 dBFS, gaps under `bridge` s joined. */
export function cleanSpeech(s: Float32Array, rate: number, bridge = 1): Array<[number, number]> {
  const n = Math.round(rate / 100);
  const out: Array<[number, number]> = [];
  for (let i = 0; i + n <= s.length; i += n) {
    let e = 0;
    for (let j = 0; j < n; j++) e += s[i + j] * s[i + j];
    if (10 * Math.log10(e / n + 1e-20) <= -55) continue;
    const [t0, t1] = [i / rate, (i + n) / rate];
    const last = out[out.length - 1];
    if (last && t0 - last[1] < bridge) last[1] = t1;
    else out.push([t0, t1]);
  }
  return out;
}

/** The fixture's speech at 48 kHz, with its truth. */
export async function fixtureSpeech(): Promise<Clip> {
  const samples = await decodeFloat(join(FIXTURES, 'dictation-16k.wav'));
  const clean16 = await decodeFloat(join(FIXTURES, 'dictation-16k.wav'), 16000);
  return { name: 'speech (fixture)', kind: 'speech', samples, speech: cleanSpeech(clean16, 16000) };
}

/** The speech cut at its sentence pauses, with silences of `gaps` seconds put in between. */
export function withSilences(speech: Clip, gaps: number[]): Clip {
  // Cut in the middle of the longest pauses between the truth's own words (frames under -55 dBFS).
  const words = cleanSpeech(speech.samples, RATE, 0.05);
  const pauses = words
    .slice(1)
    .map((w, i) => ({ at: (words[i][1] + w[0]) / 2, len: w[0] - words[i][1] }))
    .sort((a, b) => b.len - a.len)
    .slice(0, gaps.length)
    .sort((a, b) => a.at - b.at);
  const parts: Float32Array[] = [];
  let from = 0;
  const cuts = [...pauses.map((p) => Math.round(p.at * RATE)), speech.samples.length];
  cuts.forEach((cut, i) => {
    parts.push(speech.samples.subarray(from, cut));
    if (i < gaps.length) parts.push(new Float32Array(Math.round(gaps[i] * RATE)));
    from = cut;
  });
  const samples = concat(parts);
  // The truth of the clean result: a pause cut in two is no longer inside the speech.
  const speechOut = cleanSpeech(samples, RATE);
  return { name: `speech + silences ${gaps.join(', ')} s`, kind: 'speech', samples, speech: speechOut };
}

/** `clip` with noise added under all of it (the truth stays the clip's). */
export function over(clip: Clip, noise: Clip): Clip {
  const out = Float32Array.from(clip.samples);
  for (let i = 0; i < out.length; i++) out[i] += noise.samples[i % noise.samples.length];
  return { name: `${clip.name} over ${noise.name}`, kind: clip.kind, samples: out, speech: clip.speech };
}

export function silence(seconds: number): Clip {
  return { name: `silence ${seconds} s`, kind: 'silence', samples: new Float32Array(seconds * RATE), speech: [] };
}

/** Pink (1/f, Paul Kellet's filter) or brown (1/f², leaky integral) noise at an RMS level. */
export function noise(color: 'pink' | 'brown', dbfs: number, seconds: number, seed = 1): Clip {
  const r = prng(seed);
  const s = new Float32Array(seconds * RATE);
  let [b0, b1, b2, b3, b4, b5, b6] = [0, 0, 0, 0, 0, 0, 0];
  for (let i = 0; i < s.length; i++) {
    const w = r() * 2 - 1;
    if (color === 'brown') {
      b0 = 0.998 * b0 + w * 0.05;
      s[i] = b0;
      continue;
    }
    b0 = 0.99886 * b0 + w * 0.0555179;
    b1 = 0.99332 * b1 + w * 0.0750759;
    b2 = 0.969 * b2 + w * 0.153852;
    b3 = 0.8665 * b3 + w * 0.3104856;
    b4 = 0.55 * b4 + w * 0.5329522;
    b5 = -0.7616 * b5 - w * 0.016898;
    s[i] = b0 + b1 + b2 + b3 + b4 + b5 + b6 + w * 0.5362;
    b6 = w * 0.115926;
  }
  scaleTo(s, dbfs);
  return { name: `${color} noise ${dbfs} dBFS`, kind: 'noise', samples: s, speech: [] };
}

const NOTE = (semitones: number) => 261.63 * Math.pow(2, semitones / 12); // from C4

/** Music: a held chord, a chord progression (2 s chords, piano-like decay) or a melody (0.3 s notes). */
export function music(kind: 'chord' | 'progression' | 'melody', dbfs: number, seconds: number): Clip {
  const s = new Float32Array(seconds * RATE);
  const chords = [
    [0, 4, 7],
    [-3, 0, 4],
    [5, 9, 12],
    [7, 11, 14],
  ];
  const scale = [0, 2, 4, 5, 7, 9, 11, 12];
  const r = prng(7);
  const noteLen = kind === 'melody' ? 0.3 : kind === 'progression' ? 2 : seconds;
  for (let start = 0, k = 0; start < seconds; start += noteLen, k++) {
    const notes = kind === 'melody' ? [scale[Math.floor(r() * scale.length)] + 12] : chords[k % chords.length];
    const i0 = Math.round(start * RATE);
    const i1 = Math.min(s.length, Math.round((start + noteLen) * RATE));
    for (let i = i0; i < i1; i++) {
      const t = (i - i0) / RATE;
      const env = kind === 'chord' ? 1 : Math.min(1, t / 0.01) * Math.exp(-t / (kind === 'melody' ? 0.15 : 0.8));
      let v = 0;
      for (const n of notes)
        for (let h = 1; h <= 4; h++) v += Math.sin(2 * Math.PI * NOTE(n) * h * (i / RATE)) / (h * h);
      s[i] = v * env;
    }
  }
  scaleTo(s, dbfs);
  return { name: `music: ${kind} ${dbfs} dBFS`, kind: 'music', samples: s, speech: [] };
}

function scaleTo(s: Float32Array, dbfs: number): void {
  let e = 0;
  for (const v of s) e += v * v;
  const g = Math.pow(10, dbfs / 20) / Math.sqrt(e / s.length);
  for (let i = 0; i < s.length; i++) s[i] *= g;
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A clip as a 48 kHz mono s16 WAV file (what ffmpeg and Chromium's fake microphone read). */
export function writeWav(clip: Clip, file: string): void {
  const n = clip.samples.length;
  const b = Buffer.alloc(44 + 2 * n);
  b.write('RIFF', 0, 'latin1');
  b.writeUInt32LE(36 + 2 * n, 4);
  b.write('WAVEfmt ', 8, 'latin1');
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(RATE, 24);
  b.writeUInt32LE(RATE * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36, 'latin1');
  b.writeUInt32LE(2 * n, 40);
  for (let i = 0; i < n; i++)
    b.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(clip.samples[i] * 32767))), 44 + 2 * i);
  writeFileSync(file, b);
}

/** How a client encodes: ffmpeg's libopus arguments and the container. */
export interface Encoding {
  name: string;
  container: 'webm' | 'ogg';
  args: string[];
}

export const ENCODINGS: Encoding[] = [
  {
    name: 'CELT 60 ms 128 kb/s (Chromium setting)',
    container: 'webm',
    args: ['-ar', '48000', '-application', 'audio', '-b:a', '128k', '-frame_duration', '60'],
  },
  {
    name: 'SILK 20 ms 24 kb/s (VoIP, 16 kHz)',
    container: 'ogg',
    args: ['-ar', '16000', '-application', 'voip', '-b:a', '24k', '-frame_duration', '20'],
  },
  {
    name: 'Hybrid 20 ms 32 kb/s (VoIP, 48 kHz)',
    container: 'ogg',
    args: ['-ar', '48000', '-application', 'voip', '-b:a', '32k', '-frame_duration', '20'],
  },
  {
    name: "CELT 20 ms 24 kb/s (the gateway's PCM transcoder)",
    container: 'ogg',
    args: [
      '-ar',
      '16000',
      '-application',
      'lowdelay',
      '-compression_level',
      '0',
      '-b:a',
      '24k',
      '-frame_duration',
      '20',
    ],
  },
];

/** Encodes a WAV file with ffmpeg's libopus; returns the container's bytes. */
export async function encode(wav: string, e: Encoding, out: string, extra: string[] = []): Promise<Buffer> {
  await run('ffmpeg', [
    '-v',
    'error',
    '-y',
    '-i',
    wav,
    '-ac',
    '1',
    '-c:a',
    'libopus',
    ...e.args,
    ...extra,
    '-f',
    e.container,
    out,
  ]);
  return readFileSync(out);
}

/** The Opus packets of a WebM or Ogg file, in order (prism-media's demuxers). */
export async function opusPackets(data: Buffer, container: 'webm' | 'ogg'): Promise<Buffer[]> {
  const d = container === 'webm' ? new prism.opus.WebmDemuxer() : new prism.opus.OggDemuxer();
  const out: Buffer[] = [];
  d.on('data', (p: Buffer) => out.push(p));
  const done = new Promise<void>((resolve, reject) => {
    d.on('end', () => resolve());
    d.on('error', reject);
  });
  d.end(data);
  await done;
  return out;
}

/** `seconds` of speech without a pause: the fixture's words with the silences between them left out. */
export async function utterance(seconds: number): Promise<Clip> {
  const words = (await fixtureSpeech()).samples;
  const out = new Float32Array(seconds * RATE);
  const n = RATE / 100;
  for (let i = 0, at = 0; at < out.length; i = (i + n) % (words.length - n)) {
    let e = 0;
    for (let j = 0; j < n; j++) e += words[i + j] * words[i + j];
    if (10 * Math.log10(e / n + 1e-20) <= -40) continue;
    out.set(words.subarray(i, i + Math.min(n, out.length - at)), at);
    at += n;
  }
  return { name: `utterance ${seconds} s`, kind: 'speech', samples: out, speech: [[0, seconds]] };
}
