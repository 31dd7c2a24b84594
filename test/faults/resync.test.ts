// A client that comes back (resume) may have lost the bytes it sent just before its socket dropped:
// after gap() the pipeline skips to the next container boundary it can verify. Streams cut at
// random points with a random span dropped: what goes upstream is the original up to the last
// whole unit before the cut, then the original from the next boundary after the lost span — a
// valid stream that ffmpeg decodes without a word, headers once, the skipped bytes counted.
import { describe, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { PcmParser } from '../../src/audio/containers/pcm.js';
import { createParser } from '../../src/audio/source.js';
import type { Container } from '../../src/audio/sniff.js';
import {
  FIXTURES,
  chromeChunks,
  decodedSeconds,
  sendHeld,
  fixture,
  open,
  prng,
  randomChunks,
  type Run,
} from '../audio/helpers.js';

interface Case {
  name: string;
  data: Buffer;
  declared: string;
  container: Container;
  /** Whether a unit (bytes from its first) is a boundary the stream can restart from. */
  restart(unit: Buffer, timed: boolean): boolean;
  /** Bytes that appear once in a valid stream: its headers. */
  header: string;
  /** A unit that goes only with the one before it (an MP4 mdat with its moof). */
  joined?(unit: Buffer): boolean;
}

const CLUSTER = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);

/** dictation.m4a as a live encoder writes fragmented MP4 (moof+mdat pairs, half a second each). */
function fragmentedMp4(): Buffer {
  const args = [
    '-v',
    'error',
    '-i',
    `${FIXTURES}dictation.m4a`,
    '-c',
    'copy',
    '-f',
    'mp4',
    '-movflags',
    'frag_keyframe+empty_moov+default_base_moof',
    '-frag_duration',
    '500000',
    'pipe:1',
  ];
  const r = spawnSync('ffmpeg', args, { maxBuffer: 1 << 24 });
  assert.equal(r.status, 0, r.stderr?.toString());
  return r.stdout;
}
const CASES: Case[] = [
  {
    name: 'Chromium WebM/Opus',
    data: Buffer.concat(chromeChunks('webm-opus')),
    declared: 'audio/webm;codecs=opus',
    container: 'webm',
    restart: (u) => u.subarray(0, 4).equals(CLUSTER),
    header: 'OpusHead',
  },
  {
    name: 'dictation.ogg',
    data: fixture('dictation.ogg'),
    declared: 'audio/ogg;codecs=opus',
    container: 'ogg',
    restart: () => true,
    header: 'OpusHead',
  },
  {
    name: 'dictation.mp3',
    data: fixture('dictation.mp3'),
    declared: 'audio/mpeg',
    container: 'mp3',
    restart: (_u, timed) => timed,
    header: 'ID3',
  },
  {
    name: 'dictation.flac',
    data: fixture('dictation.flac'),
    declared: 'audio/flac',
    container: 'flac',
    restart: (_u, timed) => timed,
    header: 'fLaC',
  },
  {
    name: 'fragmented MP4/AAC',
    data: fragmentedMp4(),
    declared: 'audio/mp4',
    container: 'mp4',
    restart: (u) => u.toString('latin1', 4, 8) === 'moof',
    header: 'moov',
    joined: (u) => u.toString('latin1', 4, 8) === 'mdat',
  },
];

/** The stream's unit boundaries as the parser finds them without a gap, and where its headers end. */
function boundaries(c: Case): { starts: Set<number>; restarts: number[]; mediaFrom: number } {
  const starts = new Set<number>(),
    restarts: number[] = [];
  let off = 0,
    mediaFrom = -1;
  for (const u of createParser(c.container).push(c.data)) {
    if (!c.joined?.(u.bytes)) starts.add(off);
    const timed = u.end !== undefined;
    if (timed && mediaFrom < 0) mediaFrom = off;
    if (c.restart(u.bytes, timed) && mediaFrom >= 0) restarts.push(off);
    off += u.bytes.length;
  }
  starts.add(off);
  return { starts, restarts, mediaFrom };
}

/** Feeds data[0, cut) in random chunks, then gap(), then data[resumeAt, end). */
async function cutAndResume(c: Case, cut: number, resumeAt: number, seed: number): Promise<Run> {
  const run = open(c.declared);
  for (const ch of randomChunks(c.data.subarray(0, cut), seed, 4000)) run.pipeline.push(ch);
  run.pipeline.gap();
  for (const ch of randomChunks(c.data.subarray(resumeAt), seed + 1, 4000)) run.pipeline.push(ch);
  await sendHeld(run);
  run.pipeline.close();
  return run;
}

/** ffmpeg decodes the whole stream and says nothing at level error. */
function decodesCleanly(bytes: Buffer): void {
  const r = spawnSync('ffmpeg', ['-v', 'error', '-i', 'pipe:0', '-f', 'null', '-'], {
    input: bytes,
    maxBuffer: 1 << 24,
  });
  assert.equal(r.status, 0, `ffmpeg exited ${r.status}`);
  assert.equal(r.stderr.toString(), '', 'ffmpeg reports no error');
}

function count(hay: Buffer, needle: string): number {
  let n = 0;
  for (let i = hay.indexOf(needle); i >= 0; i = hay.indexOf(needle, i + 1)) n++;
  return n;
}

describe('gap(): passthrough containers resume at a verified boundary', () => {
  for (const c of CASES) {
    it(`${c.name}: random cuts and lost spans`, async () => {
      const { starts, restarts, mediaFrom } = boundaries(c);
      const r = prng(c.data.length);
      for (let i = 0; i < 6; i++) {
        const cut = mediaFrom + 1 + Math.floor(r() * (c.data.length - mediaFrom - 30000));
        const resumeAt = cut + 1 + Math.floor(r() * 8000);
        const lastWhole = Math.max(...[...starts].filter((s) => s <= cut));
        // Whole units lost (the cut and the resumption both on a boundary) continue as they are.
        const restart =
          lastWhole === cut && starts.has(resumeAt) ? resumeAt : (restarts.find((s) => s >= resumeAt) ?? c.data.length);
        const run = await cutAndResume(c, cut, resumeAt, i);
        const label = `${c.name} cut at ${cut}, resumed at ${resumeAt}`;
        assert.deepEqual(run.errors, [], label);
        const out = Buffer.concat(run.frames);
        const expected = Buffer.concat([c.data.subarray(0, lastWhole), c.data.subarray(restart)]);
        assert.ok(
          out.equals(expected),
          `${label}: the units before the cut, then the stream from byte ${restart} (got ${out.length} bytes, expected ${expected.length})`,
        );
        assert.equal(
          run.pipeline.stats.gapBytes,
          cut - lastWhole + (restart - resumeAt),
          `${label}: skipped bytes counted`,
        );
        assert.equal(count(out, c.header), 1, `${label}: headers once`);
        decodesCleanly(out);
      }
    });

    it(`${c.name}: nothing lost, gap() changes nothing`, async () => {
      const { mediaFrom } = boundaries(c);
      const r = prng(c.data.length + 1);
      for (let i = 0; i < 4; i++) {
        const cut = mediaFrom + Math.floor(r() * (c.data.length - mediaFrom));
        const run = await cutAndResume(c, cut, cut, 10 + i);
        assert.deepEqual(run.errors, []);
        assert.ok(Buffer.concat(run.frames).equals(c.data), `cut at ${cut}: byte-identical output`);
        assert.equal(run.pipeline.stats.gapBytes, 0);
      }
    });
  }
});

it('FLAC: sending what is held sends every frame it held, the last one too', async () => {
  // Chunks after which the parser held two frames when it was asked to send them (it sent only the first).
  const data = fixture('dictation.flac');
  const run = open('audio/flac');
  for (const ch of [
    ...randomChunks(data.subarray(0, 284287), 11, 4000),
    ...randomChunks(data.subarray(284287), 12, 4000),
  ])
    run.pipeline.push(ch);
  await sendHeld(run);
  assert.ok(Buffer.concat(run.frames).equals(data));
});

describe('gap(): raw PCM stays sample-aligned', () => {
  const data = fixture('dictation-16k-s16le.pcm');
  const declared = 'audio/pcm;rate=16000;channels=1;encoding=s16le';
  const chunk = 640; // 20 ms: a client sends whole sample frames in each message

  it('whole messages lost: nothing skipped, the rest transcoded on', async () => {
    const r = prng(7);
    for (let i = 0; i < 3; i++) {
      const cut = chunk * (1 + Math.floor(r() * (data.length / chunk - 200)));
      const lost = chunk * (1 + Math.floor(r() * 50));
      const run = open(declared);
      for (let off = 0; off < data.length; off += chunk) {
        if (off === cut) run.pipeline.gap();
        if (off < cut || off >= cut + lost) run.pipeline.push(data.subarray(off, off + chunk));
      }
      await sendHeld(run);
      run.pipeline.close();
      assert.deepEqual(run.errors, []);
      assert.equal(run.pipeline.stats.gapBytes, 0);
      const out = Buffer.concat(run.frames);
      decodesCleanly(out);
      assert.equal(count(out, 'OpusHead'), 1);
      const seconds = (data.length - lost) / 32000;
      assert.ok(Math.abs((await decodedSeconds(out)) - seconds) < 0.1, `about ${seconds} s decoded`);
    }
  });

  it('WAV: a partial sample frame before the gap is dropped, the rest transcoded on', async () => {
    const wav = fixture('dictation-16k.wav');
    const dataAt = wav.indexOf('data') + 8;
    const cut = dataAt + 10001,
      resumeAt = dataAt + 20000; // the client sent odd-sized pieces
    const run = open('audio/wav');
    for (const ch of randomChunks(wav.subarray(0, cut), 3, 3000)) run.pipeline.push(ch);
    run.pipeline.gap();
    for (const ch of randomChunks(wav.subarray(resumeAt), 4, 3000)) run.pipeline.push(ch);
    await sendHeld(run);
    run.pipeline.close();
    assert.deepEqual(run.errors, []);
    assert.equal(run.pipeline.stats.gapBytes, 1);
    const out = Buffer.concat(run.frames);
    decodesCleanly(out);
    const seconds = (wav.length - dataAt - (resumeAt - cut + 1)) / 32000;
    assert.ok(Math.abs((await decodedSeconds(out)) - seconds) < 0.1, `about ${seconds} s decoded`);
  });

  it('a partial sample frame before the gap is dropped, never joined to the next bytes', () => {
    const parser = new PcmParser({ sampleRate: 16000, channels: 1, encoding: 's16le' });
    const out = [...parser.push(data.subarray(0, 1001))];
    parser.gap();
    out.push(...parser.push(data.subarray(2000, 3000)));
    assert.equal(parser.gapBytes, 1);
    assert.ok(
      Buffer.concat(out.map((u) => u.bytes)).equals(Buffer.concat([data.subarray(0, 1000), data.subarray(2000, 3000)])),
    );
    // Nothing lost and nothing held: gap() changes nothing.
    parser.gap();
    out.push(...parser.push(data.subarray(3000, 3002)));
    assert.equal(parser.gapBytes, 1);
  });
});
