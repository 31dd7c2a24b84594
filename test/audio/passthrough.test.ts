// Passthrough formats: byte-identical output, frames within 64000 bytes, headers complete in the
// first frame, whatever the client's chunking.
import { onTestFinished, test } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { FIXTURES, bytewise, chromeChunks, fixture, probe, randomChunks, runAll, tool, type Run } from './helpers.js';

const CASES: Array<{ name: string; declared: string | undefined; kind: string; codec: string }> = [
  { name: 'dictation.webm', declared: 'audio/webm;codecs=opus', kind: 'webm-opus', codec: 'opus' },
  { name: 'dictation-48k-stereo.webm', declared: 'audio/webm', kind: 'webm-opus', codec: 'opus' },
  { name: 'convo-2ch.webm', declared: undefined, kind: 'webm-opus', codec: 'opus' },
  { name: 'dictation.ogg', declared: 'audio/ogg;codecs=opus', kind: 'ogg-opus', codec: 'opus' },
  { name: 'dictation-vorbis.ogg', declared: 'audio/ogg', kind: 'ogg-vorbis', codec: 'vorbis' },
  { name: 'dictation.mp3', declared: 'audio/mpeg', kind: 'mp3', codec: 'mp3' },
  { name: 'dictation.flac', declared: 'audio/flac', kind: 'flac', codec: 'flac' },
];

function checkFrames(run: Run, input: Buffer): void {
  assert.deepEqual(run.errors, []);
  for (const f of run.frames) assert.ok(f.length <= 64000, `frame of ${f.length} bytes`);
  assert.ok(Buffer.concat(run.frames).equals(input), 'output bytes equal input bytes');
}

for (const c of CASES) {
  test(`${c.name}: passthrough, byte-identical, first frame decodable alone`, async () => {
    const data = fixture(c.name);
    const whole = await runAll(c.declared, [data]);
    checkFrames(whole, data);
    assert.equal(whole.pipeline.stats.source, c.kind);
    const first = await probe(whole.frames[0]);
    assert.equal(first.codec, c.codec, 'ffprobe reads the codec from the first frame alone');
    const full = await probe(c.name);
    assert.ok(
      Math.abs(whole.pipeline.stats.mediaSecondsOut - full.duration) < 0.1,
      `media ${whole.pipeline.stats.mediaSecondsOut} vs ${full.duration}`,
    );
    // Coalesced to about chunkMs: 26 s of audio in well under one frame per container frame.
    assert.ok(
      whole.frames.length >= full.duration / 1.2 && whole.frames.length <= full.duration / 0.15,
      `${whole.frames.length} frames`,
    );
    for (const seed of [1, 2, 3]) {
      const run = await runAll(c.declared, randomChunks(data, seed));
      checkFrames(run, data);
      assert.ok(run.frames[0].equals(whole.frames[0]), 'the first frame does not depend on the chunking');
    }
  });
}

test('one byte at a time: WebM, Ogg, MP3, FLAC', async () => {
  for (const name of ['dictation.webm', 'dictation.ogg', 'dictation.mp3', 'dictation.flac']) {
    const data = fixture(name);
    const run = await runAll(undefined, bytewise(data));
    checkFrames(run, data);
  }
});

test('Chromium live WebM/Opus: browser chunks, random chunks, headers held until complete', async () => {
  const chunks = chromeChunks('webm-opus');
  const data = Buffer.concat(chunks);
  const run = await runAll('audio/webm;codecs=opus', chunks);
  checkFrames(run, data);
  assert.equal((await probe(run.frames[0])).codec, 'opus');
  // Chromium writes 60 ms packets; about 250 ms per frame means 4 or 5 packets each.
  const dur = run.pipeline.stats.mediaSecondsOut;
  assert.ok(dur > 7 && dur < 9, `media ${dur}`);
  assert.ok(
    run.frames.length >= dur / 0.35 && run.frames.length <= dur / 0.2,
    `${run.frames.length} frames for ${dur} s`,
  );
  // A first chunk cut inside the headers still gives a first frame with all of them.
  const tiny = [data.subarray(0, 7), data.subarray(7, 40), data.subarray(40)];
  const t = await runAll('audio/webm', tiny);
  checkFrames(t, data);
  assert.ok(t.frames[0].equals(run.frames[0]));
  for (const seed of [4, 5]) checkFrames(await runAll(undefined, randomChunks(data, seed, 3000)), data);
  for (const seed of [6, 7]) checkFrames(await runAll('audio/webm', randomChunks(data, seed)), data);
});

test('frames never exceed maxFrameBytes even when one container unit is larger', async () => {
  // With a 20 s chunk interval, frames are bounded by size alone.
  const data = fixture('dictation-48k-stereo.webm');
  const run = await runAll('audio/webm', [data], { chunkMs: 20000 });
  checkFrames(run, data);
  assert.ok(
    run.frames.some((f) => f.length > 55000),
    'long chunks make big frames',
  );
  // Pages bigger than the frame limit are split anyway (here with a 1000-byte limit).
  const ogg = fixture('dictation.ogg');
  const small = await runAll('audio/ogg', randomChunks(ogg, 21, 5000), { maxFrameBytes: 1000 });
  assert.deepEqual(small.errors, []);
  for (const f of small.frames) assert.ok(f.length <= 1000, `frame of ${f.length} bytes`);
  assert.ok(Buffer.concat(small.frames).equals(ogg));
  assert.ok(small.pipeline.stats.framesSplit > 0);
});

test('a 16 MiB unit is cut into frames that are views of it, not copies of all that is pending', async () => {
  // Chromium's headers and a first Cluster, then one SimpleBlock of 16 MiB on the audio track.
  const head = Buffer.concat(chromeChunks('webm-opus')).subarray(0, 161);
  const payload = Buffer.alloc(16 << 20, 0x5a);
  const size = Buffer.alloc(8);
  size.writeUIntBE(payload.length + 4, 2, 6);
  size[0] = 0x01; // an 8-byte EBML size
  const input = Buffer.concat([head, Buffer.from([0xa3]), size, Buffer.from([0x81, 0, 0, 0x80]), payload]);
  const run = await runAll('audio/webm', [input]);
  assert.deepEqual(run.errors, []);
  assert.ok(Buffer.concat(run.frames).equals(input));
  assert.ok(run.frames.length > 260 && run.frames.every((f) => f.length <= 64000));
  // No frame is a copy: the headers and the block's start lie end to end in the input too. Each cut
  // was once a copy of everything still pending (16 MiB, then 16 MiB less 64000, ...: 2 GiB, the
  // loop blocked 0.6 s), and then the first frame was still joined by copying.
  const copies = run.frames.filter((f) => f.buffer !== input.buffer);
  assert.equal(copies.length, 0, `${copies.length} frames copied`);
});

test('units that lie end to end in one message go upstream as views of it, not joined by copying', async () => {
  const input = Buffer.concat(chromeChunks('webm-opus')); // Chromium's 31 pieces as one message
  const run = await runAll('audio/webm', [input]);
  assert.deepEqual(run.errors, []);
  assert.ok(Buffer.concat(run.frames).equals(input));
  assert.ok(run.frames.length >= 28, `${run.frames.length} frames of about 250 ms`);
  const copies = run.frames.filter((f) => f.buffer !== input.buffer);
  assert.equal(copies.length, 0, `${copies.length} of ${run.frames.length} frames copied`);
});

test('MP4/AAC with its moov at the end: held, moov sent first, decodes to the full duration', async () => {
  const data = fixture('dictation.m4a');
  for (const chunks of [[data], randomChunks(data, 9, 20000)]) {
    const run = await runAll('audio/mp4', chunks);
    assert.deepEqual(run.errors, []);
    assert.equal(run.pipeline.stats.source, 'mp4-aac');
    for (const f of run.frames) assert.ok(f.length <= 64000);
    const out = Buffer.concat(run.frames);
    assert.equal(out.length, data.length, 'same boxes, rearranged');
    assert.ok(run.frames.length > 60, `the 181 KB mdat goes out in about 250 ms frames (${run.frames.length})`);
    assert.equal(out.toString('latin1', 4, 8), 'ftyp');
    assert.ok(run.frames[0].includes(Buffer.from('moov')), 'the first frame holds the moov');
    const p = await probe(out);
    assert.equal(p.codec, 'aac');
    assert.ok(Math.abs(p.duration - 25.9) < 0.1);
  }
});

test('MP4/AAC fragmented (as live encoders write it) and faststart: byte-identical, paced by sample time', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'audio-mp4-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const variants: Array<[string, string[]]> = [
    ['fragmented', ['-movflags', 'frag_keyframe+empty_moov+default_base_moof', '-frag_duration', '500000']],
    ['fragmented after moov samples', ['-movflags', 'frag_keyframe', '-frag_duration', '500000']],
    ['faststart', ['-movflags', '+faststart']],
  ];
  for (const [flags, args] of variants) {
    const file = join(dir, `${flags.replace(/\W/g, '_')}.mp4`);
    await tool(
      'ffmpeg',
      ['-v', 'error', '-y', '-i', `${FIXTURES}dictation.m4a`, '-c', 'copy', ...args, file],
      Buffer.alloc(0),
    );
    const data = readFileSync(file);
    const run = await runAll('audio/mp4', randomChunks(data, 13, 30000));
    checkFrames(run, data);
    assert.equal(run.pipeline.stats.source, 'mp4-aac');
    assert.equal((await probe(run.frames[0])).codec, 'aac', `${flags}: the first frame holds ftyp+moov`);
    assert.ok(
      Math.abs(run.pipeline.stats.mediaSecondsOut - 25.9) < 0.1,
      `${flags}: media ${run.pipeline.stats.mediaSecondsOut}`,
    );
    const span = run.times[run.times.length - 1] - run.times[0];
    assert.ok(span > 20_000, `${flags}: released over ${span} ms, not at once`);
  }
});
