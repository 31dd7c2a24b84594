// Hostile review, session side: audio held behind a pending flush is bounded, tiny frames are
// coalesced, `end` does not cut audio still being paced, and the recorded outcome says what
// really happened. All over real sockets: ws client → uWS gateway → upstream emulator.
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { configured, startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const ogg = fixture('dictation.ogg'); // ~26 s, ~70 KB
const API = 'test-usage-token';

const OGG_CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg' };

// The gateway runs in this process: its heap, after a full collection, is what it retains.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapAfterGc = () => {
  gc();
  return process.memoryUsage().heapUsed;
};

describe('end waits for paced audio, and the outcome is the truth', () => {
  let stack: Stack;
  beforeAll(async () => {
    // 26 s of audio paced at 4× takes ~6.5 s to send; the upstream has 1.5 s to answer `end`.
    stack = await startStack({ PACE: '4', END_TIMEOUT_MS: '1500', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('a whole file sent at once, then end: every second is transcribed, usage is final, close 1000', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, OGG_CONFIG);
    for (let off = 0; off < ogg.length; off += 32_000) c.send(ogg.subarray(off, off + 32_000)); // `npm run stream -- --fast`
    c.sendJson({ type: 'end' });
    await c.next('ended', 30_000);
    assert.equal((await c.closed).code, 1000);
    assert.ok(
      !c.types().includes('error'),
      `no error: ${JSON.stringify(c.messages.filter((m) => m.type === 'error'))}`,
    );
    assert.ok(
      finals(c.messages).at(-1)!.end > 25,
      `transcripts cover the whole file (last ends at ${finals(c.messages).at(-1)?.end})`,
    );
    assert.ok(Buffer.compare(stack.emulator.sessions.at(-1)!.audio, ogg) === 0, 'the upstream got every byte');
    const row = (await endedLedgerSessions(stack, API, { count: 1 })).at(-1)!;
    assert.equal(row.outcome, 'ended');
    assert.equal(row.estimated, false);
    assert.ok(row.credits > 0);
  });

  it('an upstream that never answers end: the client is told, the ledger says upstream_timeout, estimated', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, OGG_CONFIG);
    c.send(ogg.subarray(0, 20_000));
    await c.next('transcript', 10_000);
    stack.emulator.faults.stall = true;
    try {
      c.sendJson({ type: 'end' });
      const err = await c.next('error', 20_000);
      assert.equal(err.error.id, 'UPSTREAM_TIMEOUT');
      assert.equal((await c.closed).code, 1014);
    } finally {
      stack.emulator.faults.stall = false;
    }
    const row = (await endedLedgerSessions(stack, API, { count: 2 })).at(-1)!;
    assert.equal(
      row.outcome,
      'upstream_timeout',
      'the client asked to end, but the session did not end: the record says so',
    );
    assert.equal(row.estimated, true);
  });
});

describe('what one message may carry', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({});
  });
  afterAll(() => stack.close());

  for (const [field, configuration] of [
    ['primaryLanguage', { primaryLanguage: 'e'.repeat(10 * 1024 * 1024) }],
    ['audioFormat', { primaryLanguage: 'en', audioFormat: `audio/${'x'.repeat(10 * 1024 * 1024)}` }],
  ] as const) {
    it(`a 10 MB ${field} is denied with a reason, not forwarded, not echoed`, async () => {
      const before = stack.emulator.sessions.length;
      const c = await stack.connect('transcribe');
      c.sendJson({ type: 'config', configuration });
      const denied = await c.next('CONFIG_DENIED');
      assert.ok(
        denied.reason.length < 300,
        `a short reason (${denied.reason.length} chars): ${denied.reason.slice(0, 300)}`,
      );
      assert.equal((await c.closed).code, 4400);
      assert.equal(stack.emulator.sessions.length, before, 'nothing reached the upstream');
    });
  }
});

describe('every buffer of a session is bounded, counted in input bytes', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1', MAX_BUFFERED_AUDIO_BYTES: String(1024 * 1024), USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('audio sent while a flush waits for paced audio is counted: a flood gets AUDIO_BUFFER_OVERRUN, not memory', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, OGG_CONFIG);
    c.send(ogg); // 26 s at real time: the flush below waits ~26 s for it
    c.sendJson({ type: 'flush' });
    const flood = Buffer.alloc(60_000, 0x55);
    for (let i = 0; i < 100 && c.ws.readyState === c.ws.OPEN; i++) c.send(flood); // 6 MB behind the flush
    const err = await c.next('error', 10_000);
    assert.equal(err.error.id, 'AUDIO_BUFFER_OVERRUN');
    assert.equal((await c.closed).code, 4422);
    const row = (await endedLedgerSessions(stack, API, { count: 1 })).at(-1)!;
    assert.equal(row.outcome, 'error');
    assert.ok(row.end !== null, 'the session is closed in the ledger');
  });

  it('one-byte frames held behind a flush cost bytes, not an object each', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, OGG_CONFIG);
    c.send(ogg.subarray(0, ogg.indexOf('OggS', 40_000))); // ~15 s paced: the flush below stays pending
    c.sendJson({ type: 'flush' });
    const before = heapAfterGc();
    const byte = Buffer.from([0x4f]);
    for (let i = 0; i < 200_000; i++) c.send(byte);
    while (c.ws.bufferedAmount > 0) await delay(20);
    await delay(500); // the gateway has read them all
    const grown = heapAfterGc() - before;
    assert.ok(c.ws.readyState === c.ws.OPEN, 'the session goes on');
    assert.ok(grown < 4 * 1024 * 1024, `200,000 held one-byte frames grew the heap by ${(grown / 1e6).toFixed(1)} MB`);
    c.ws.terminate();
  });

  it('one-byte frames are coalesced: the audio arrives whole, in a few frames', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, OGG_CONFIG);
    const part = ogg.subarray(0, ogg.indexOf('OggS', 12_000)); // whole Ogg pages: a partial last page is never sent
    for (let i = 0; i < part.length; i++) c.send(part.subarray(i, i + 1));
    c.sendJson({ type: 'end' });
    await c.next('ended', 30_000);
    const up = stack.emulator.sessions.at(-1)!;
    assert.ok(
      Buffer.compare(up.audio, part) === 0,
      `byte-identical (got ${up.audio.length} of ${part.length}: ${up.frames})`,
    );
    assert.ok(up.frames.length < 20, `12,000 one-byte frames arrive as ${up.frames.length} upstream frames`);
  });
});
