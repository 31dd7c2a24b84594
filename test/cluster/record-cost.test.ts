// What resumable sessions cost Redis while they stream, on a real redis-server: each session's
// record is written in full once (its content sealed), and what moves while it streams goes to one
// hash of the replica's (a field per session) in batched writes, not a record rewrite per final.
import assert from 'node:assert/strict';
import net from 'node:net';
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

/** The commands the gateway sends about session records and positions (not the ledger's), as MONITOR
 *  sees them on a plain socket of its own: top-level only (what runs inside a script is the script's). */
function watchRecords(port: number): Promise<{ counts: Map<string, number>; stop(): void }> {
  const counts = new Map<string, number>();
  const socket = net.connect({ host: '127.0.0.1', port });
  let rest = '';
  socket.on('data', (b: Buffer) => {
    const lines = (rest + b.toString('latin1')).split('\r\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      // +1700000000.123456 [0 127.0.0.1:1234] "evalsha" "<sha>" "1" "sgw:rec:..." ...
      const m = /^\+[\d.]+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (!m || m[1] === 'lua') continue;
      const args = [...m[2].matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((a) => a[1]);
      const name = (args[0] ?? '').toLowerCase();
      const key = name === 'evalsha' || name === 'eval' ? args[3] : args[1];
      if (/^sgw:(rec|pos):/.test(key ?? '')) counts.set(name, (counts.get(name) ?? 0) + 1);
    }
  });
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write('MONITOR\r\n');
      resolve({ counts, stop: () => socket.destroy() });
    });
  });
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
    const watch = await watchRecords(redis.port);
    const started = Date.now();
    for (const piece of pieces) {
      for (const c of clients) c.send(piece);
      await delay(300);
    }
    await Promise.all(clients.map((c) => c.next('transcript', 10_000)));
    watch.stop();
    const seconds = (Date.now() - started) / 1000;
    const count = (name: string) => watch.counts.get(name) ?? 0;
    const delivered = clients.reduce((n, c) => n + finals(c.messages).length, 0);
    const rows = [...watch.counts].map(([k, n]) => `${k} ${n}`);
    console.log(
      `${SESSIONS} sessions, ${seconds.toFixed(1)} s, ${delivered} finals; records and positions: ${rows.join(', ')}`,
    );

    // The record scripts: one full write each once its timeline exists (the key's claim came before).
    const writes = count('evalsha') + count('eval');
    assert.ok(writes <= SESSIONS * 2, `record writes: ${writes}`);
    assert.ok(delivered >= SESSIONS, 'finals were delivered while this was counted');
    const positions = await direct.keys('sgw:pos:*');
    assert.equal(positions.length, 1, 'one positions hash: this replica');
    assert.equal(await direct.hlen(positions[0]), SESSIONS, 'a field per session');
    const batches = count('hset');
    assert.ok(batches > 0 && batches <= seconds * 10 + 2, `position batches at most 10 a second: ${batches}`);
    const all = [...watch.counts.values()].reduce((a, n) => a + n, 0);
    assert.ok(all / SESSIONS / seconds < 1, `${(all / SESSIONS / seconds).toFixed(2)} commands per session-second`);

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
