// What resumable sessions cost Redis while they stream, on a real redis-server: each session's
// record is written in full once (its content sealed), and what moves while it streams goes to one
// hash of the replica's (a field per session) in batched writes, not a record rewrite per final.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, resumeUrl, startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const SESSIONS = 10;
const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

/** Calls per command from INFO commandstats. */
async function calls(redis: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    out.set(m[1], Number(m[2]));
  return out;
}

describe('Redis cost of streaming resumable sessions', () => {
  let redis: TestRedis;
  let stack: Stack;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await stack?.close();
    await redis?.stop();
  });

  it('writes each record in full once; positions go to one hash of the replica in batches', async () => {
    const direct = new Redis(redis.url);
    const clients = await Promise.all(
      Array.from({ length: SESSIONS }, async () => {
        const c = await openClient(
          resumeUrl(stack.base, 'base', newResumeKey(), await stack.token('openid transcribe')),
        );
        c.sendJson({ type: 'config', configuration });
        await c.next('CONFIG_ACCEPTED');
        return c;
      }),
    );
    const before = await calls(direct);
    const started = Date.now();
    for (const piece of pieces) {
      for (const c of clients) c.send(piece);
      await delay(300);
    }
    await Promise.all(clients.map((c) => c.next('transcript', 10_000)));
    const after = await calls(direct);
    const seconds = (Date.now() - started) / 1000;
    const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    const delivered = clients.reduce((n, c) => n + finals(c.messages).length, 0);
    const rows = [...after.keys()].map((k) => `${k} ${delta(k)}`).filter((r) => !r.endsWith(' 0'));
    console.log(`${SESSIONS} sessions, ${seconds.toFixed(1)} s, ${delivered} finals: ${rows.join(', ')}`);

    // The record scripts: one full write each once its timeline exists (the key's claim came before).
    assert.ok(delta('evalsha') + delta('eval') <= SESSIONS * 2, `record writes: ${delta('evalsha') + delta('eval')}`);
    assert.ok(delivered >= SESSIONS, 'finals were delivered while this was counted');
    const positions = await direct.keys('sgw:pos:*');
    assert.equal(positions.length, 1, 'one positions hash: this replica');
    assert.equal(await direct.hlen(positions[0]), SESSIONS, 'a field per session');
    const batches = delta('hset');
    assert.ok(batches > 0 && batches <= seconds * 10 + 2, `position batches at most 10 a second: ${batches}`);
    const perSession = (batches + delta('evalsha') + delta('mget') + delta('pexpire')) / SESSIONS / seconds;
    assert.ok(perSession < 1, `${perSession.toFixed(2)} commands per session-second`);

    for (const c of clients) c.sendJson({ type: 'end' });
    await Promise.all(clients.map((c) => c.next('ended', 30_000)));
    await delay(1500); // the next batch deletes the ended sessions' fields
    assert.equal(
      (await direct.exists(positions[0])) ? await direct.hlen(positions[0]) : 0,
      0,
      'ended sessions leave no position',
    );
    direct.disconnect();
  });
});
