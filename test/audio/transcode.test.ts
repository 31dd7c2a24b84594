// Formats the upstream can't take come out as Ogg/Opus that ffmpeg decodes to the input's duration.
import { afterAll, test } from 'vitest';
import assert from 'node:assert/strict';
import { closeDefaultEncoderPool } from '../../src/audio/transcode/index.js';
import {
  chromeChunks,
  decodedSeconds,
  sendHeld,
  fixture,
  open,
  probe,
  randomChunks,
  runAll,
  type Run,
} from './helpers.js';

afterAll(async () => {
  await closeDefaultEncoderPool();
});

async function checkOggOpus(run: Run, expectSeconds: number, kind: string): Promise<void> {
  assert.deepEqual(run.errors, []);
  assert.equal(run.pipeline.stats.source, kind);
  for (const f of run.frames) assert.ok(f.length <= 64000);
  const first = await probe(run.frames[0]);
  assert.equal(first.codec, 'opus', 'the first frame alone carries OpusHead and OpusTags');
  const out = Buffer.concat(run.frames);
  const seconds = await decodedSeconds(out);
  assert.ok(Math.abs(seconds - expectSeconds) <= 0.04, `decoded ${seconds} s, input ${expectSeconds} s`);
  assert.ok(run.pipeline.stats.transcodeSeconds > 0);
  assert.ok(
    Math.abs(run.pipeline.stats.mediaSecondsOut - expectSeconds) < 0.1,
    `mediaSecondsOut ${run.pipeline.stats.mediaSecondsOut}`,
  );
}

test('WAV 16 kHz, declared or detected, any chunking', async () => {
  const data = fixture('dictation-16k.wav');
  const seconds = (data.length - 44) / 2 / 16000;
  await checkOggOpus(await runAll('audio/wav', [data]), seconds, 'wav');
  await checkOggOpus(await runAll(undefined, randomChunks(data, 7)), seconds, 'wav');
});

test('WAV 44.1 kHz (a rate Opus cannot take directly)', async () => {
  const data = fixture('dictation-44k1.wav');
  await checkOggOpus(await runAll('audio/x-wav', randomChunks(data, 8)), (data.length - 44) / 2 / 44100, 'wav');
});

test('raw PCM s16le and L16 (big-endian)', async () => {
  const le = fixture('dictation-16k-s16le.pcm');
  const seconds = le.length / 2 / 16000;
  await checkOggOpus(await runAll('audio/pcm;rate=16000;channels=1', randomChunks(le, 3, 30000)), seconds, 'pcm');
  const be = Buffer.from(le);
  be.swap16();
  await checkOggOpus(await runAll('audio/L16;rate=16000;channels=1', [be]), seconds, 'pcm');
});

test('Chromium WebM/PCM float32, browser chunks', async () => {
  const chunks = chromeChunks('webm-pcm-f32');
  const expected = (await probe(Buffer.concat(chunks))).duration;
  const run = await runAll('audio/webm;codecs=pcm', chunks);
  const seconds = Number.isFinite(expected) ? expected : run.pipeline.stats.mediaSecondsIn;
  await checkOggOpus(run, seconds, 'webm-pcm');
  await checkOggOpus(await runAll(undefined, randomChunks(Buffer.concat(chunks), 12)), seconds, 'webm-pcm');
});

test('Chromium MP4/Opus: remuxed to Ogg/Opus, declared plain audio/mp4 or audio/mp4;codecs=opus', async () => {
  const chunks = chromeChunks('mp4-opus');
  const data = Buffer.concat(chunks);
  const full = await decodedSeconds(data);
  for (const [declared, input] of [
    ['audio/mp4', chunks],
    ['audio/mp4;codecs=opus', randomChunks(data, 11, 5000)],
    [undefined, [data]],
  ] as const) {
    const run = await runAll(declared, [...input]);
    await checkOggOpus(run, full, 'mp4-opus');
  }
});

test('WAV with a sample format the gateway does not take: AUDIO_UNRECOGNIZED, nothing sent', async () => {
  const wav = Buffer.from(fixture('dictation-16k.wav'));
  wav.writeUInt16LE(24, 34); // bits per sample
  const run = await runAll('audio/wav', [wav]);
  assert.equal(run.frames.length, 0);
  assert.deepEqual(
    run.errors.map((e) => e.id),
    ['AUDIO_UNRECOGNIZED'],
  );
});

test('audio after a mid-stream flush (what is held sent) goes on as a chained Ogg/Opus stream', async () => {
  const data = fixture('dictation-16k.wav');
  const run = open('audio/wav');
  run.pipeline.push(data.subarray(0, 300_044));
  await sendHeld(run);
  const atFlush = await decodedSeconds(Buffer.concat(run.frames));
  assert.ok(Math.abs(atFlush - 300_000 / 32000) <= 0.04, `everything before the flush went out: ${atFlush} s`);
  run.pipeline.push(data.subarray(300_044));
  await sendHeld(run);
  run.pipeline.close();
  assert.equal(run.errors.length, 0);
  const seconds = await decodedSeconds(Buffer.concat(run.frames));
  assert.ok(Math.abs(seconds - (data.length - 44) / 32000) <= 0.06, `decoded ${seconds} s`);
});
