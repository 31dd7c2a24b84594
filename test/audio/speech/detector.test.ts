// The speech detector on real encoder output (ffmpeg's libopus, Chromium's recording): the speech of
// the fixtures is found, a long silence and a quiet room's noise are never speech, in every packet
// framing a client's encoder makes; hostile packets are judged unknown, never a crash.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { SpeechDetector } from '../../../src/audio/index.js';
import { chromeChunks, fixture, prng } from '../../support/fixtures.js';
import * as L from './labelled.js';
import { detectPackets, score } from './score.js';

let dir: string;
let speech: L.Clip;
let gaps: L.Clip;
const files = new Map<string, string>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'speech-'));
  speech = await L.fixtureSpeech();
  gaps = L.withSilences(speech, [2, 10]);
  for (const c of [
    speech,
    gaps,
    L.silence(60),
    L.noise('pink', -50, 30),
    L.noise('brown', -50, 30),
    L.noise('pink', -35, 60, 2),
  ]) {
    const wav = join(dir, `${files.size}.wav`);
    L.writeWav(c, wav);
    files.set(c.name, wav);
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** libopus settings whose packets cover every framing: TOC codes 0-3, 1-3 SILK frames, CELT 2.5-20 ms. */
const FRAMINGS: Array<{ name: string; container: 'webm' | 'ogg'; args: string[] }> = [
  { name: 'CELT 60 ms (code 3, Chromium setting)', container: 'webm', args: L.ENCODINGS[0].args },
  {
    name: 'CELT 40 ms (code 1/2)',
    container: 'ogg',
    args: ['-ar', '48000', '-application', 'audio', '-b:a', '96k', '-frame_duration', '40'],
  },
  {
    name: 'CELT 10 ms',
    container: 'ogg',
    args: ['-ar', '48000', '-application', 'lowdelay', '-b:a', '64k', '-frame_duration', '10'],
  },
  {
    name: 'CELT 5 ms',
    container: 'ogg',
    args: ['-ar', '48000', '-application', 'lowdelay', '-b:a', '64k', '-frame_duration', '5'],
  },
  {
    name: 'CELT 2.5 ms',
    container: 'ogg',
    args: ['-ar', '48000', '-application', 'lowdelay', '-b:a', '64k', '-frame_duration', '2.5'],
  },
  { name: 'SILK 20 ms (code 0)', container: 'ogg', args: L.ENCODINGS[1].args },
  {
    name: 'SILK 60 ms (3 VAD flags a frame)',
    container: 'ogg',
    args: ['-ar', '16000', '-application', 'voip', '-b:a', '16k', '-frame_duration', '60'],
  },
  {
    name: 'SILK 40 ms (2 VAD flags a frame)',
    container: 'ogg',
    args: ['-ar', '16000', '-application', 'voip', '-b:a', '16k', '-frame_duration', '40'],
  },
  { name: 'Hybrid 20 ms', container: 'ogg', args: L.ENCODINGS[2].args },
];

async function detect(clip: string, f: (typeof FRAMINGS)[number]) {
  const out = join(dir, `${files.size}-${Math.random().toString(36).slice(2)}.${f.container}`);
  const data = await L.encode(files.get(clip)!, { ...f }, out);
  return detectPackets(await L.opusPackets(data, f.container));
}

describe.each(FRAMINGS)('$name', (f) => {
  test('finds the speech of the fixture, and nothing in the 2 s and 10 s silences put into it', async () => {
    const d = await detect(gaps.name, f);
    const s = score(gaps.speech, d.stretches, d.seconds);
    assert.ok(s.found / s.truth >= 0.9, `found ${s.found.toFixed(1)} of ${s.truth.toFixed(1)} s of speech`);
    assert.ok(s.falseSpeech <= 0.5, `${s.falseSpeech.toFixed(2)} s of the silences called speech`);
    assert.ok(d.detector.stretchCount >= 3, 'the silences split the speech into stretches');
  });

  test('a minute of silence and half a minute of quiet room noise are never speech', async () => {
    for (const clip of ['silence 60 s', 'pink noise -50 dBFS', 'brown noise -50 dBFS']) {
      const d = await detect(clip, f);
      assert.deepEqual(d.stretches, [], `${clip}: no speech stretch`);
      assert.equal(d.detector.speechSeconds, 0);
      assert.ok(d.detector.judgedSeconds > 25, `${clip}: judged, not unknown`);
    }
  });

  test("a noisy room's steady noise (pink, -35 dBFS) is not speech: at most 5% of a minute", async () => {
    const d = await detect('pink noise -35 dBFS', f);
    assert.ok(d.detector.speechSeconds <= 3, `${d.detector.speechSeconds.toFixed(1)} s called speech`);
  });
});

test("Chromium's recording (live WebM, CELT 60 ms): its speech found where the clean source speaks", async () => {
  const packets = await L.opusPackets(Buffer.concat(chromeChunks('webm-opus')), 'webm');
  const d = detectPackets(packets);
  const s = score(speech.speech, d.stretches, d.seconds);
  // The recording holds the first 9 s of the fixture; it starts a few ms into it.
  assert.ok(d.seconds > 8.5 && d.seconds < 9.5, `${d.seconds} s recorded`);
  assert.ok(s.found / s.truth >= 0.85, `found ${s.found.toFixed(1)} of ${s.truth.toFixed(1)} s`);
});

test("the opusenc fixture (SILK): the encoder's own VAD flags give the speech", () => {
  return L.opusPackets(fixture('dictation.ogg'), 'ogg').then((packets) => {
    const d = detectPackets(packets);
    const s = score(speech.speech, d.stretches, d.seconds);
    assert.ok(s.found / s.truth >= 0.9, `found ${s.found.toFixed(1)} of ${s.truth.toFixed(1)} s`);
  });
});

test('hostile packets: random bytes, truncated and empty packets are judged unknown or quiet, never thrown', async () => {
  const r = prng(42);
  const d = new SpeechDetector();
  const real = await L.opusPackets(fixture('dictation.webm'), 'webm');
  let t = 0;
  for (let i = 0; i < 20_000; i++) {
    const src = real[i % real.length];
    const kind = i % 4;
    const p =
      kind === 0
        ? Uint8Array.from({ length: Math.floor(r() * 1400) }, () => Math.floor(r() * 256))
        : kind === 1
          ? src.subarray(0, Math.floor(r() * src.length))
          : kind === 2
            ? new Uint8Array(0)
            : Uint8Array.from(src, (b, j) => (j > 0 && r() < 0.05 ? Math.floor(r() * 256) : b));
    d.packet(p, t, 0.02);
    t += 0.02;
  }
  assert.ok(Math.abs(d.judgedSeconds + d.unknownSeconds - t) < 1e-6, 'every packet judged or unknown');
  assert.ok(d.unknownSeconds > 0, 'malformed packets are unknown');
  // Times from a broken container: nothing judged, and the session's figures stay numbers.
  for (const [start, duration] of [
    [NaN, 0.06],
    [t, NaN],
    [t, -1],
    [Infinity, 0.06],
  ])
    d.packet(real[10], start, duration);
  assert.ok(
    Number.isFinite(d.speechSeconds) && Number.isFinite(d.judgedSeconds),
    `${d.speechSeconds} s, ${d.judgedSeconds} s`,
  );
});

test('the stretch list stays bounded over a long session; speech seconds still count every stretch', () => {
  const d = new SpeechDetector({ maxStretches: 16 });
  // Ten hours of 1 s of speech then 1 s of silence, in 20 ms decisions.
  for (let s = 0; s < 36_000; s++) for (let k = 0; k < 50; k++) d.decision(s + k * 0.02, 0.02, s % 2 === 0);
  assert.equal(d.stretchCount, 16);
  assert.ok(Math.abs(d.speechSeconds - 18_000) < 1, `${d.speechSeconds} s of speech`);
  assert.ok(d.stretchStart(15) > 35_990, 'the newest stretches are the ones kept');
  assert.ok(Math.abs(d.speechBetween(35_990, 36_000) - 5) < 0.1);
});
