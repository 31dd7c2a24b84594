// Nothing lost: while Redis is away events go to the on-disk journal and are replayed, in
// order and idempotently, when it returns; a ledger closed with Redis down leaves a journal
// that the next instance replays.
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, test } from 'vitest';
import { createUsage, type UsageOptions } from '../../src/usage/index.js';
import { NO_SPEECH, get, tempDir, uniquePrefix, usageOptions } from '../support/usage.js';
import { until } from '../support/wait.js';
import { startRedis, type TestRedis } from './redis.js';

const DAY = 86_400_000;
const T0 = Math.floor(Date.now() / DAY) * DAY - DAY + 3_600_000; // yesterday 01:00 UTC
const RANGE = `from=${new Date(T0 - DAY).toISOString()}&to=${new Date(T0 + DAY).toISOString()}&granularity=day`;

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis({ persist: true });
});
afterAll(async () => {
  await redis.stop();
});

const options = (journalDir: string, keyPrefix: string, extra: Partial<UsageOptions> = {}): UsageOptions =>
  usageOptions({ redis: { url: redis.url }, journalDir, keyPrefix, ...extra });

test('events recorded while Redis is down are journaled and replayed exactly when it returns', async () => {
  const u = await createUsage(options(tempDir(), uniquePrefix()));
  u.ledger.sessionStarted({ sessionKey: 'j1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
  u.ledger.recordUsage({ sessionKey: 'j1', seq: 1, kind: 'delta', credits: 1.5, at: T0 });
  await u.ledger.flush();
  assert.equal(u.ledger.journalDepth, 0);

  await redis.stop();
  u.ledger.recordUsage({ sessionKey: 'j1', seq: 2, kind: 'delta', credits: 0.7, at: T0 });
  u.ledger.recordUsage({ sessionKey: 'j1', seq: 3, kind: 'final', credits: 3.5, at: T0 });
  u.ledger.sessionEnded({ sessionKey: 'j1', outcome: 'ended', mediaSeconds: 30, endedAt: T0 + 30_000 });
  u.ledger.sessionStarted({ sessionKey: 'j2', tenant: 'acme', endpoint: 'streams', startedAt: T0 + 1000 });
  u.ledger.recordUsage({ sessionKey: 'j2', seq: 1, kind: 'delta', credits: 0.1, at: T0 });
  u.ledger.recordUsage({ sessionKey: 'j2', seq: 1, kind: 'delta', credits: 0.1, at: T0 }); // duplicate
  u.ledger.sessionEnded({ sessionKey: 'j2', outcome: 'upstream_lost', mediaSeconds: 2, endedAt: T0 + 3000 });
  await u.ledger.flush();
  assert.equal(u.ledger.redisHealthy, false);
  assert.ok(u.ledger.journalDepth > 0, 'events are in the journal');
  assert.equal((await get(u.api, `/v1/usage?tenant=acme&${RANGE}`)).status, 503);

  await redis.restart();
  await until(() => u.ledger.journalDepth === 0, 'journal replay');
  const usage = await get(u.api, `/v1/usage?tenant=acme&${RANGE}`);
  assert.deepEqual(usage.body.total, { credits: 3.6, sessions: 2, mediaSeconds: 32, ...NO_SPEECH });
  const sessions = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions;
  assert.deepEqual(
    sessions.map((s: any) => [s.sessionKey, s.credits, s.estimated, s.outcome]),
    [
      ['j1', 3.5, false, 'ended'],
      ['j2', 0.1, true, 'upstream_lost'],
    ],
  );
  await u.close();
});

test('close() with Redis down leaves a journal that the next instance replays on start', async () => {
  const dir = tempDir();
  const prefix = uniquePrefix();
  await redis.stop();
  const first = await createUsage(options(dir, prefix));
  assert.equal(first.ledger.redisHealthy, false);
  first.ledger.sessionStarted({ sessionKey: 'c1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
  first.ledger.recordUsage({ sessionKey: 'c1', seq: 1, kind: 'final', credits: 2.000001, at: T0 });
  first.ledger.sessionEnded({ sessionKey: 'c1', outcome: 'shutdown', mediaSeconds: 4.25, endedAt: T0 + 1 });
  await first.close();
  const lines = readFileSync(join(dir, 'usage-journal.jsonl'), 'utf8').trim().split('\n');
  assert.equal(lines.length, 3);
  // Readable by the gateway's user only, whatever the umask.
  assert.equal(statSync(join(dir, 'usage-journal.jsonl')).mode & 0o777, 0o600);

  await redis.restart();
  const second = await createUsage(options(dir, prefix));
  await until(() => second.ledger.journalDepth === 0, 'journal replay on start');
  const usage = await get(second.api, `/v1/usage?tenant=acme&${RANGE}`);
  assert.deepEqual(usage.body.total, { credits: 2.000001, sessions: 1, mediaSeconds: 4.25, ...NO_SPEECH });
  await second.close();
});

test('a ledger started while Redis is down writes to Redis once it comes up', async () => {
  await redis.stop();
  const u = await createUsage(options(tempDir(), uniquePrefix()));
  u.ledger.sessionStarted({ sessionKey: 'd1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
  u.ledger.recordUsage({ sessionKey: 'd1', seq: 1, kind: 'final', credits: 7, at: T0 });
  await u.ledger.flush();
  assert.equal(u.ledger.journalDepth, 2);
  await redis.restart();
  await until(() => u.ledger.journalDepth === 0 && u.ledger.redisHealthy, 'reconnect and replay');
  u.ledger.sessionEnded({ sessionKey: 'd1', outcome: 'ended', mediaSeconds: 1, endedAt: T0 + 1 });
  await u.ledger.flush();
  assert.equal(u.ledger.journalDepth, 0);
  const usage = await get(u.api, `/v1/usage?tenant=acme&${RANGE}`);
  assert.deepEqual(usage.body.total, { credits: 7, sessions: 1, mediaSeconds: 1, ...NO_SPEECH });
  await u.close();
});

test('a full journal refuses the newest events and keeps the oldest', async () => {
  await redis.stop();
  const dir = tempDir();
  const u = await createUsage(options(dir, uniquePrefix(), { journalMaxEvents: 3 }));
  for (let seq = 1; seq <= 5; seq++) u.ledger.recordUsage({ sessionKey: 'f1', seq, kind: 'delta', credits: 1, at: T0 });
  await u.ledger.flush();
  assert.equal(u.ledger.journalDepth, 3);
  // Each line is the event's JSON, a tab and its checksum.
  const seqs = readFileSync(join(dir, 'usage-journal.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l.split('\t')[0]).seq);
  assert.deepEqual(seqs, [1, 2, 3]);
  await u.close();
  await redis.restart();
});
