// Declared format vs bytes: a mismatch or garbage is one error and nothing forwarded.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { bytewise, chromeChunks, fixture, open, prng, runAll, sendHeld } from './helpers.js';

const garbage = (() => {
  const r = prng(42);
  return Buffer.from(Array.from({ length: 5000 }, () => Math.floor(r() * 256)));
})();

test('declared Ogg/Opus but the stream is WebM/Opus: AUDIO_FORMAT_MISMATCH, no frame', async () => {
  const run = await runAll('audio/ogg;codecs=opus', [fixture('dictation.webm')]);
  assert.equal(run.frames.length, 0);
  assert.equal(run.errors.length, 1);
  assert.equal(run.errors[0].id, 'AUDIO_FORMAT_MISMATCH');
  assert.equal(run.errors[0].details, 'declared "audio/ogg;codecs=opus" but the stream is WebM/Opus');
});

test('codec mismatches inside the right container are caught too', async () => {
  const vorbis = await runAll('audio/ogg;codecs=opus', bytewise(fixture('dictation-vorbis.ogg').subarray(0, 4000)));
  assert.deepEqual([vorbis.frames.length, vorbis.errors.map((e) => e.id)], [0, ['AUDIO_FORMAT_MISMATCH']]);
  assert.match(vorbis.errors[0].details, /Ogg\/Vorbis/);
  const pcm = await runAll('audio/webm;codecs=opus', chromeChunks('webm-pcm-f32'));
  assert.deepEqual([pcm.frames.length, pcm.errors.map((e) => e.id)], [0, ['AUDIO_FORMAT_MISMATCH']]);
  assert.match(pcm.errors[0].details, /WebM\/PCM/);
  const mp3 = await runAll('audio/flac', [fixture('dictation.mp3')]);
  assert.deepEqual([mp3.frames.length, mp3.errors.map((e) => e.id)], [0, ['AUDIO_FORMAT_MISMATCH']]);
});

test('a PCM declaration over container bytes is a mismatch', async () => {
  const run = await runAll('audio/pcm;rate=16000;channels=1', [fixture('dictation-16k.wav')]);
  assert.deepEqual([run.frames.length, run.errors.map((e) => e.id)], [0, ['AUDIO_FORMAT_MISMATCH']]);
});

test('garbage: AUDIO_UNRECOGNIZED, declared or not, whole or byte by byte', async () => {
  for (const declared of [undefined, 'audio/webm', 'audio/mpeg']) {
    for (const chunks of [[garbage], bytewise(garbage.subarray(0, 64))]) {
      const run = await runAll(declared, chunks);
      assert.equal(run.frames.length, 0);
      assert.deepEqual(
        run.errors.map((e) => e.id),
        ['AUDIO_UNRECOGNIZED'],
      );
    }
  }
  const text = await runAll(undefined, [Buffer.from('{"type":"config","configuration":{}}')]);
  assert.deepEqual([text.frames.length, text.errors.map((e) => e.id)], [0, ['AUDIO_UNRECOGNIZED']]);
});

test('sending what is held inside the headers forwards nothing; the stream then goes on', async () => {
  const data = fixture('dictation.webm');
  const run = open('audio/webm');
  run.pipeline.push(data.subarray(0, 100));
  await sendHeld(run);
  assert.equal(run.frames.length, 0);
  assert.equal(run.errors.length, 0);
  run.pipeline.push(data.subarray(100));
  await sendHeld(run);
  assert.ok(Buffer.concat(run.frames).equals(data));
  run.pipeline.close();
});

test('nothing is emitted after an error', async () => {
  const run = await runAll('audio/ogg', [fixture('dictation.webm'), fixture('dictation.ogg')]);
  assert.equal(run.frames.length, 0);
  assert.equal(run.errors.length, 1);
});
