// The audio bound counts what the client sent, not what the transcoder made of it. Raw PCM
// becomes ~20× fewer Opus bytes, so counting output let a client run far ahead of real time.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { configured, startStack, type Stack, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';

const PCM = fixture('dictation-16k-s16le.pcm'); // 16 kHz mono s16le: 32000 bytes a second
const PCM_FORMAT = 'audio/pcm;rate=16000;channels=1';
const SECOND = 32000;
const BOUND = 2_000_000; // about 62 s of this PCM; as Opus, ~10 minutes

const PCM_CONFIG = { primaryLanguage: 'en', audioFormat: PCM_FORMAT };

/** Sends `seconds` of PCM (the fixture repeated), one second of audio every `1000 / speed` ms;
 * stops early when the socket closes. */
async function sendPcm(c: TestClient, seconds: number, speed: number): Promise<void> {
  for (let s = 0; s < seconds && c.ws.readyState === c.ws.OPEN; s++) {
    const off = (s * SECOND) % (PCM.length - SECOND);
    c.send(PCM.subarray(off, off + SECOND));
    await delay(1000 / speed);
  }
}

/** `end`, then the session ends normally: no error, `ended`, close 1000. */
async function endsCleanly(c: TestClient): Promise<void> {
  c.sendJson({ type: 'end' });
  const { code } = await c.closed;
  assert.deepEqual(
    c.messages.filter((m) => m.type === 'error'),
    [],
  );
  assert.ok(c.types().includes('ended'));
  assert.equal(code, 1000);
}

describe('PCM far ahead of real time (PACE 1)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ MAX_BUFFERED_AUDIO_BYTES: String(BOUND) });
  });
  afterAll(() => stack.close());

  it('at 50× real time: AUDIO_BUFFER_OVERRUN within a few seconds, then close 4422', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, PCM_CONFIG);
    const started = Date.now();
    const sending = sendPcm(c, 1500, 50); // 30 s at 50×
    const e = await c.next('error', 10_000);
    assert.equal(e.error.id, 'AUDIO_BUFFER_OVERRUN');
    assert.ok(Date.now() - started < 5000, `told after ${Date.now() - started} ms`);
    assert.equal((await c.closed).code, 4422);
    await sending;
  });

  it('at real time the same stream is not refused', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, PCM_CONFIG);
    for (let i = 0; i < 30; i++) {
      // 3 s in 100 ms pieces
      c.send(PCM.subarray((i * SECOND) / 10, ((i + 1) * SECOND) / 10));
      await delay(100);
    }
    await endsCleanly(c);
  });
});

describe('PCM far ahead of real time with PACE 100', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ MAX_BUFFERED_AUDIO_BYTES: String(BOUND), PACE: '100' });
  });
  afterAll(() => stack.close());

  it('at 50× real time the stream goes through: the upstream may take it that fast', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, PCM_CONFIG);
    await sendPcm(c, 60, 50);
    await endsCleanly(c);
  });
});
