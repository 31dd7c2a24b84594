// Audio handling end to end: every fixture goes client → gateway → emulator, and what the emulator
// received is a stream the upstream accepts. Decoded durations are checked with the real ffmpeg.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { protocolViolations } from '../support/emulator.js';
import { chromeChunks, fixture, randomChunks } from '../support/fixtures.js';
import { startStack, type Stack, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';

const tmp = mkdtempSync(join(tmpdir(), 'sgw-audio-'));

/** Decoded duration in seconds, by decoding every sample with ffmpeg (not the container's claim). */
function decodedSeconds(bytes: Buffer, name: string, input: string[] = []): number {
  const file = join(tmp, name);
  writeFileSync(file, bytes);
  const pcm = execFileSync(
    'ffmpeg',
    ['-v', 'error', ...input, '-i', file, '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1'],
    { maxBuffer: 1 << 28 },
  );
  return pcm.length / 2 / 48000;
}

async function streamThrough(
  stack: Stack,
  audioFormat: string | undefined,
  chunks: Buffer[],
): Promise<{ client: TestClient; upstream: Stack['emulator']['sessions'][number] }> {
  const client = await stack.connect('transcribe');
  client.sendJson({
    type: 'config',
    configuration: { primaryLanguage: 'en', ...(audioFormat ? { audioFormat } : {}) },
  });
  await client.next('CONFIG_ACCEPTED');
  for (const c of chunks) client.send(c);
  client.sendJson({ type: 'end' });
  await client.next('ended', 60_000);
  return { client, upstream: stack.emulator.sessions.at(-1)! };
}

describe('audio through the gateway', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '50' });
  });
  afterAll(() => stack.close());

  const passthrough: Array<[string, string]> = [
    ['dictation.ogg', 'audio/ogg;codecs=opus'],
    ['dictation-vorbis.ogg', 'audio/ogg;codecs=vorbis'],
    ['dictation.webm', 'audio/webm;codecs=opus'],
    ['dictation-48k-stereo.webm', 'audio/webm'],
    ['convo-2ch.webm', 'audio/webm;codecs=opus'],
    ['dictation.mp3', 'audio/mpeg'],
    ['dictation.flac', 'audio/flac'],
  ];
  for (const [name, format] of passthrough) {
    it(`${name} (${format}) passes through byte-identical in frames ≤ 64000, headers first`, async () => {
      const audio = fixture(name);
      const { upstream } = await streamThrough(stack, format, randomChunks(audio, name.length));
      assert.ok(upstream.audio.equals(audio), 'byte-identical');
      assert.ok(
        upstream.frames.every((n) => n <= 64000),
        `frames ${upstream.frames}`,
      );
      assert.deepEqual(protocolViolations(stack.emulator), []);
    });
  }

  it('dictation.m4a (moov after mdat) goes upstream with its moov first, same bytes otherwise, and decodes to the same duration', async () => {
    const audio = fixture('dictation.m4a');
    const { upstream } = await streamThrough(stack, 'audio/mp4', randomChunks(audio, 3));
    assert.equal(upstream.audio.length, audio.length);
    assert.equal(upstream.audio.subarray(4, 8).toString('latin1'), 'ftyp');
    assert.ok(
      upstream.audio.subarray(0, upstream.frames[0]).includes('moov'),
      'the first frame holds the moov (complete headers)',
    );
    assert.ok(upstream.frames.every((n) => n <= 64000));
    const want = decodedSeconds(audio, 'in.m4a');
    const got = decodedSeconds(upstream.audio, 'out.m4a');
    assert.ok(Math.abs(got - want) <= 0.001, `decoded ${got} s vs ${want} s`);
    assert.deepEqual(protocolViolations(stack.emulator), []);
  });

  it('Chromium live WebM/Opus with its real chunk boundaries, and then in random 1 B–200 KB chunks', async () => {
    const chunks = chromeChunks('webm-opus');
    const whole = Buffer.concat(chunks);
    for (const sent of [chunks, randomChunks(whole, 7)]) {
      const { upstream } = await streamThrough(stack, 'audio/webm;codecs=opus', sent);
      assert.ok(upstream.audio.equals(whole));
      assert.ok(upstream.frames[0] >= 4000, 'the first frame holds the complete headers, not a tiny first chunk');
      assert.ok(upstream.frames.every((n) => n <= 64000));
    }
    assert.deepEqual(protocolViolations(stack.emulator), []);
  });

  const transcoded: Array<[string, string, Buffer[], number]> = [
    [
      'WAV 16 kHz',
      'audio/wav',
      [fixture('dictation-16k.wav')],
      decodedSeconds(fixture('dictation-16k.wav'), 'in16.wav'),
    ],
    [
      'WAV 44.1 kHz (resampled)',
      'audio/wav',
      [fixture('dictation-44k1.wav')],
      decodedSeconds(fixture('dictation-44k1.wav'), 'in44.wav'),
    ],
    [
      'raw PCM s16le',
      'audio/pcm;rate=16000;channels=1',
      [fixture('dictation-16k-s16le.pcm')],
      fixture('dictation-16k-s16le.pcm').length / 2 / 16000,
    ],
    [
      'Chromium WebM/PCM float32',
      'audio/webm;codecs=pcm',
      chromeChunks('webm-pcm-f32'),
      decodedSeconds(Buffer.concat(chromeChunks('webm-pcm-f32')), 'inpcm.webm'),
    ],
    [
      'Chromium MP4/Opus (remuxed)',
      'audio/mp4;codecs=opus',
      chromeChunks('mp4-opus'),
      decodedSeconds(Buffer.concat(chromeChunks('mp4-opus')), 'inmp4.mp4'),
    ],
  ];
  for (const [label, format, chunks, inputSeconds] of transcoded) {
    it(`${label} is transcoded to Ogg/Opus that decodes to the input's duration (±40 ms)`, async () => {
      const { upstream } = await streamThrough(stack, format, chunks);
      assert.match(
        String((upstream.config as { audioFormat?: string }).audioFormat),
        /^audio\/ogg/,
        'the upstream config names the transcoded format',
      );
      assert.equal(upstream.audio.subarray(0, 4).toString('latin1'), 'OggS');
      assert.ok(upstream.frames.every((n) => n <= 64000));
      const out = decodedSeconds(upstream.audio, `out-${label.replace(/\W+/g, '_')}.ogg`);
      assert.ok(
        Math.abs(out - inputSeconds) <= 0.04,
        `decoded ${out.toFixed(3)} s vs input ${inputSeconds.toFixed(3)} s`,
      );
      assert.deepEqual(protocolViolations(stack.emulator), []);
    });
  }

  it('an undeclared WAV is detected (not guessed) and transcoded', async () => {
    const { upstream } = await streamThrough(stack, undefined, [fixture('dictation-16k.wav')]);
    assert.equal(upstream.audio.subarray(0, 4).toString('latin1'), 'OggS');
  });

  it('audio that contradicts the declared format gets AUDIO_FORMAT_MISMATCH and nothing reaches the upstream', async () => {
    const client = await stack.connect('transcribe');
    client.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' } });
    await client.next('CONFIG_ACCEPTED');
    client.send(fixture('dictation.webm'));
    const e = await client.next('error');
    assert.equal(e.error.id, 'AUDIO_FORMAT_MISMATCH');
    assert.equal((await client.closed).code, 4422);
    const up = stack.emulator.sessions.at(-1)!;
    assert.equal(up.audio.length, 0);
    for (let i = 0; i < 50 && !up.closed; i++) await delay(100);
    assert.ok(
      up.received.some((r) => r.kind === 'end'),
      'the upstream session was ended gracefully (its usage is final)',
    );
  });

  it('garbage bytes get AUDIO_UNRECOGNIZED and nothing reaches the upstream', async () => {
    const client = await stack.connect('transcribe');
    client.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await client.next('CONFIG_ACCEPTED');
    client.send(Buffer.from('this is not audio at all, just some text that a broken client sent'.repeat(100)));
    const e = await client.next('error');
    assert.equal(e.error.id, 'AUDIO_UNRECOGNIZED');
    await client.closed;
    assert.equal(stack.emulator.sessions.at(-1)!.audio.length, 0);
  });
});

describe('pacing through the gateway', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1' });
  });
  afterAll(() => stack.close());

  it('a 9 s recording sent all at once reaches the upstream no faster than real time', async () => {
    const chunks = chromeChunks('webm-opus');
    const { upstream } = await streamThrough(stack, 'audio/webm;codecs=opus', [Buffer.concat(chunks)]);
    const audioTimes = upstream.received.filter((r) => r.kind === 'audio').map((r) => r.t);
    const spread = (audioTimes.at(-1)! - audioTimes[0]) / 1000;
    // The last frame can leave once the media before it has played: about 9 s minus one chunk.
    assert.ok(
      spread >= 8.5,
      `audio spread over ${spread.toFixed(2)} s of wall time for ${upstream.mediaSeconds.toFixed(2)} s of media`,
    );
    assert.ok(upstream.frames.length >= 25, `about 250 ms frames (got ${upstream.frames.length} frames)`);
    assert.deepEqual(stack.emulator.violations, [], 'not even the pacing rule is broken');
  });
});
