// Encoder threads cost memory: none until a PCM stream needs one, and they go again when idle.
import { test, vi } from 'vitest';
import assert from 'node:assert/strict';
import { createEncoderPool, createPcmToOpus } from '../../src/audio/transcode/index.js';
import { getDefaultEncoderPool } from '../../src/audio/transcode/encoder-pool.js';
import { fixture } from '../support/fixtures.js';
import { startStack } from '../support/stack.js';

const FORMAT = { sampleRate: 16000, channels: 1, encoding: 's16le' } as const;
const pcm = fixture('dictation-16k-s16le.pcm');

test('a fresh gateway runs no encoder thread', async () => {
  const stack = await startStack();
  try {
    assert.equal(getDefaultEncoderPool().workers, 0);
  } finally {
    await stack.close();
  }
});

test('workers start with the streams that need them, at most `threads`, and stop after idleMs', async () => {
  // The idle timer on a fake clock (the workers, their messages and setImmediate stay real).
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const pool = createEncoderPool({ threads: 2, idleMs: 200 });
  try {
    assert.equal(pool.workers, 0);
    const streams = [0, 1, 2].map(() => createPcmToOpus(FORMAT, { pool }));
    assert.equal(pool.workers, 2, 'three streams share two threads');
    for (const t of streams) assert.ok((await t.push(pcm.subarray(0, 32000))).mediaSeconds > 0.9);
    await Promise.all(streams.slice(0, 2).map((t) => t.end()));
    streams[2].close();
    vi.advanceTimersByTime(200);
    assert.equal(pool.workers, 0, 'idle workers stopped');
    const again = createPcmToOpus(FORMAT, { pool });
    assert.equal(pool.workers, 1, 'one stream, one thread');
    assert.ok((await again.push(pcm.subarray(0, 32000))).mediaSeconds > 0.9);
    await again.end();
  } finally {
    await pool.close();
    vi.useRealTimers();
  }
});
