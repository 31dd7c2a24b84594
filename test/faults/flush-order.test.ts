// Audio sent after a flush, while the flush still waits for the audio before it, must reach the
// upstream before an `end` that follows: nothing a client sent before its `end` may be lost.
// (Found by the load benchmark: a piece between a flush and an end could be sent after the end,
// and a transcoded stream's flush started a chained Ogg stream, which the upstream counted no further.)
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks, fixture } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const webm = chromeChunks('webm-opus');
const pcm = fixture('dictation-16k-s16le.pcm');
const PIECE = 8000; // 250 ms of 16 kHz mono s16le

describe('flush, more audio, end', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1' });
  });
  afterAll(() => stack.close());

  async function dictate(audioFormat: string, pieces: Buffer[], flushAfter: number) {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat } });
    await c.next('CONFIG_ACCEPTED');
    for (const [i, piece] of pieces.entries()) {
      c.send(piece);
      if (i === flushAfter) c.sendJson({ type: 'flush' });
      await delay(250);
    }
    c.sendJson({ type: 'end' });
    const usage = await c.next('usage', 20_000);
    await c.next('ended');
    return { usage, upstream: stack.emulator.sessions.at(-1)! };
  }

  it('WebM passthrough: audio sent while a flush waits for paced audio goes upstream before the end that follows', async () => {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
    await c.next('CONFIG_ACCEPTED');
    for (const piece of webm.slice(0, 16)) c.send(piece); // 4 s at once: paced out at real time
    c.sendJson({ type: 'flush' }); // waits ~4 s for that audio to go out
    for (const piece of webm.slice(16)) c.send(piece); // behind the flush
    c.sendJson({ type: 'end' }); // behind that audio
    await c.next('ended', 20_000);
    const upstream = stack.emulator.sessions.at(-1)!;
    assert.ok(
      Buffer.compare(upstream.audio, Buffer.concat(webm)) === 0,
      `the upstream got every byte (${upstream.audio.length} of ${Buffer.concat(webm).length})`,
    );
    const kinds = upstream.received.map((r) => r.kind);
    assert.ok(kinds.lastIndexOf('audio') < kinds.indexOf('end'), 'no audio after end');
    assert.ok(kinds.indexOf('flush') < kinds.lastIndexOf('audio'), 'the audio after the flush came after it');
  });

  it('PCM transcoded: the pieces after the flush go on in the same Ogg/Opus stream, before the end', async () => {
    const pieces = Array.from({ length: 20 }, (_, i) => pcm.subarray(i * PIECE, (i + 1) * PIECE));
    const { upstream } = await dictate('audio/pcm;rate=16000;channels=1', pieces, 11);
    assert.ok(upstream.mediaSeconds > 4.8, `the upstream got the whole 5 s (${upstream.mediaSeconds} s)`);
    assert.equal(upstream.audio.indexOf('OpusHead', 100), -1, 'one Ogg stream: a flush does not start a chained one');
  });
});
