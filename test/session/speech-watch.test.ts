// The stall watch on real encoder output (libopus at Chromium's setting, CELT 60 ms): speech sent
// without a transcript message back for STALL_SPEECH_SECONDS makes a stall; transcripts keep it away;
// ten minutes of silence or of a noisy room never make one.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, it } from 'vitest';
import { SpeechWatch } from '../../src/session/speech-watch.js';
import {
  encode,
  ENCODINGS,
  fixtureSpeech,
  noise,
  opusPackets,
  silence,
  writeWav,
  type Clip,
} from '../audio/speech/labelled.js';

const CHROMIUM = ENCODINGS[0];
const dir = mkdtempSync(join(tmpdir(), 'sgw-watch-'));

async function packetsOf(clip: Clip, name: string): Promise<Buffer[]> {
  const wav = join(dir, `${name}.wav`);
  writeWav(clip, wav);
  return opusPackets(await encode(wav, CHROMIUM, join(dir, `${name}.webm`)), 'webm');
}

/** Sends `packets` through a watch as the session does (each packet parsed, then sent), calling
 *  `upstream(t)` after each; returns the media times at which it said stalled. */
/** The media is sent at real time: the watch's clock is the media's. */
let clockMs = 0;
const watchAtRealTime = () => new SpeechWatch(10, () => clockMs);

function run(watch: SpeechWatch, packets: Buffer[], upstream: (t: number) => void = () => undefined, from = 0) {
  const stalls: number[] = [];
  packets.forEach((p, i) => {
    const start = from + i * 0.06;
    clockMs = (start + 0.06) * 1000;
    watch.packet(p, 0, p.length, start, 0.06);
    if (watch.sent(start + 0.06)) {
      stalls.push(start + 0.06);
      watch.ready(); // the replacement starts its own count
    }
    upstream(start + 0.06);
  });
  return stalls;
}

describe('the stall watch', () => {
  let speech: Buffer[];
  beforeAll(async () => {
    speech = await packetsOf(await fixtureSpeech(), 'speech');
  }, 60_000);

  it('speech without a transcript back is a stall once 10 s of it went upstream and the recogniser had 2 s to answer', () => {
    const w = watchAtRealTime();
    w.ready();
    const stalls = run(w, speech);
    assert.ok(stalls.length >= 1, 'stalled');
    assert.ok(
      stalls[0] > 12 && stalls[0] < 16,
      `at ${stalls[0]} s of media (10 s of speech and its pauses, and the 2 s the recogniser had to answer)`,
    );
  });

  it('a burst of speech sent ahead of real time is not owed a transcript until the recogniser had time', () => {
    const w = new SpeechWatch(10, () => 0); // the whole fixture at once: no time has passed
    w.ready();
    assert.deepEqual(
      run(w, speech, () => (clockMs = 0)),
      [],
    );
  });

  it('transcripts every second keep a stall away', () => {
    const w = watchAtRealTime();
    w.ready();
    let next = 1;
    const stalls = run(w, [...speech, ...speech], (t) => {
      if (t >= next) {
        w.heard();
        next++;
      }
    });
    assert.deepEqual(stalls, []);
  });

  for (const [what, clip] of [
    ['silence', () => silence(600)],
    ['a noisy room (pink noise, -35 dBFS)', () => noise('pink', -35, 600)],
  ] as const)
    it(`ten minutes of ${what} make no stall and no speech`, async () => {
      const w = watchAtRealTime();
      w.ready();
      assert.deepEqual(run(w, await packetsOf(clip(), what.replace(/\W+/g, '-'))), []);
      assert.ok(w.figures().speechSeconds < 30, `speech found: ${w.figures().speechSeconds} s of 600`);
    }, 120_000);

  it('coverage: the finals after a stall cover its audio again, and say so once', () => {
    const w = watchAtRealTime();
    w.ready();
    run(w, speech.slice(0, 300)); // 18 s: one stall
    const news = w.final(0, 18);
    assert.equal(news?.kind, 'recovered');
    assert.equal(w.final(18, 18.5), undefined);
    const f = w.figures();
    assert.ok(f.speechSeconds > 15 && f.coveredSeconds === f.speechSeconds, JSON.stringify(f));
  });
});
