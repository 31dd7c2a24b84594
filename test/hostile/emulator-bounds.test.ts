// The embedded emulator stays small: what `npm start`'s emulator remembers is a bounded
// window (the most recent session records, a total of audio bytes, the most recent violations and
// token requests), however many sessions it has served.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { fixture } from '../support/fixtures.js';
import { openClient } from '../support/stack.js';

const interaction = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

async function inBatches(n: number, size: number, one: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < n; i += size)
    await Promise.all(Array.from({ length: Math.min(size, n - i) }, (_, k) => one(i + k)));
}

describe('emulator memory window', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator();
  });
  afterAll(() => em.close());

  it('after 250 sessions it holds the most recent 200 records and the most recent 1000 violations', async () => {
    const jwt = await em.issueToken({ tenant: 'base', scope: 'openid streams' });
    await inBatches(250, 25, async (i) => {
      const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${jwt}` });
      const c = await openClient(`${em.wsBase}/interactions/${interaction(i)}/streams?${q}`);
      for (let k = 0; k < 5; k++) c.send('not json'); // a violation each
      for (let k = 0; k < 5; k++) await c.next('error');
      c.ws.close();
      await c.closed;
    });
    assert.equal(em.sessions.length, 200);
    assert.deepEqual(
      em.sessions.map((s) => s.interactionId).sort(),
      Array.from({ length: 200 }, (_, k) => interaction(50 + k)),
      'the 200 most recent sessions',
    );
    assert.equal(em.violations.length, 1000);
  });

  it('keeps at most 1000 token requests', async () => {
    await inBatches(1100, 50, async () => {
      const res = await fetch(`${em.authBase}/realms/base/protocol/openid-connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials&client_id=dev&client_secret=wrong',
      });
      await res.body?.cancel();
    });
    assert.equal(em.tokenRequests.length, 1000);
  });
});

describe('emulator audio budget', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator({ maxAudioBytes: 150_000 });
  });
  afterAll(() => em.close());

  it("drops the oldest sessions' audio first, says so, and keeps the recent ones whole", async () => {
    const ogg = fixture('dictation.ogg'); // 70 KB: three sessions' audio exceed the budget
    const jwt = await em.issueToken({ tenant: 'base', scope: 'openid transcribe' });
    for (let i = 0; i < 3; i++) {
      const c = await openClient(
        `${em.wsBase}/transcribe?${new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${jwt}` })}`,
      );
      c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
      await c.next('CONFIG_ACCEPTED');
      for (let off = 0; off < ogg.length; off += 16_000) c.send(ogg.subarray(off, off + 16_000));
      c.sendJson({ type: 'end' });
      await c.next('ended');
      c.ws.close();
    }
    const [first, second, third] = em.sessions;
    assert.equal(first.audioDropped, true);
    assert.equal(first.audio.length, 0);
    assert.equal(
      first.frames.reduce((a, b) => a + b, 0),
      ogg.length,
      'what was received is still counted',
    );
    for (const s of [second, third]) {
      assert.equal(s.audioDropped, false);
      assert.ok(Buffer.compare(s.audio, ogg) === 0);
    }
  });
});
