// A gateway session made of several upstream sessions in turn (segments): its credits are the sum
// of each segment's final figure, or of that segment's deltas when its final never came (then the
// session is estimated). Same in Redis and in process; journal replays and old journal lines
// (written before segments, so without `seg`) count once, as segment 0.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { MemoryUsageStore } from '../../src/usage/memory-store.js';
import type { LedgerEvent, UsageStore } from '../../src/usage/model.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { NO_SPEECH, get, tempDir, uniquePrefix, usageOptions } from '../support/usage.js';
import { until } from '../support/wait.js';
import { startRedis, type TestRedis } from './redis.js';

const DAY = 86_400_000;
const T0 = Math.floor(Date.now() / DAY) * DAY - DAY + 3_600_000; // yesterday 01:00 UTC
const RANGE = `from=${new Date(T0 - DAY).toISOString()}&to=${new Date(T0 + DAY).toISOString()}&granularity=day`;

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const total = async (u: Usage) => (await get(u.api, `/v1/usage?tenant=acme&${RANGE}`)).body.total.credits;
const session = async (u: Usage, key: string) =>
  (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions.find(
    (s: { sessionKey: string }) => s.sessionKey === key,
  );

for (const mode of ['redis', 'in-process'] as const) {
  describe(`segments (${mode})`, () => {
    const make = () =>
      createUsage(usageOptions(mode === 'redis' ? { redis: { url: redis.url }, keyPrefix: uniquePrefix() } : {}));

    test('two upstream sessions with their finals: the credits are the sum, not estimated', async () => {
      const u = await make();
      u.ledger.sessionStarted({ sessionKey: 'm1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
      u.ledger.setUpstreamSessionId('m1', 'up-a', 0);
      u.ledger.recordUsage({ sessionKey: 'm1', seq: 1, seg: 0, kind: 'delta', credits: 0.1, at: T0 });
      u.ledger.recordUsage({ sessionKey: 'm1', seq: 2, seg: 0, kind: 'delta', credits: 0.2, at: T0 });
      u.ledger.recordUsage({ sessionKey: 'm1', seq: 3, seg: 0, kind: 'final', credits: 0.25, at: T0 });
      u.ledger.setUpstreamSessionId('m1', 'up-b', 1);
      u.ledger.recordUsage({ sessionKey: 'm1', seq: 4, seg: 1, kind: 'delta', credits: 0.05, at: T0 });
      await u.ledger.flush();
      // Segment 0's final replaced its own deltas only; segment 1 is still provisional.
      assert.equal(await total(u), 0.3);
      assert.equal((await session(u, 'm1')).estimated, true);

      u.ledger.recordUsage({ sessionKey: 'm1', seq: 5, seg: 1, kind: 'final', credits: 0.125, at: T0 });
      u.ledger.sessionEnded({ sessionKey: 'm1', outcome: 'ended', mediaSeconds: 20, endedAt: T0 + 20_000 });
      await u.ledger.flush();
      const s = await session(u, 'm1');
      assert.deepEqual([s.credits, s.estimated, s.upstreamSessionId], [0.375, false, 'up-a']);
      assert.deepEqual(s.segments, [
        { upstreamSessionId: 'up-a', credits: 0.25, estimated: false },
        { upstreamSessionId: 'up-b', credits: 0.125, estimated: false },
      ]);
      assert.deepEqual((await get(u.api, `/v1/usage?tenant=acme&${RANGE}`)).body.total, {
        credits: 0.375,
        sessions: 1,
        mediaSeconds: 20,
        ...NO_SPEECH,
      });
      await u.close();
    });

    test('a segment whose final never came counts its deltas and marks the session estimated', async () => {
      const u = await make();
      u.ledger.sessionStarted({ sessionKey: 'm2', tenant: 'acme', endpoint: 'streams', startedAt: T0 });
      u.ledger.setUpstreamSessionId('m2', 'up-a', 0);
      u.ledger.recordUsage({ sessionKey: 'm2', seq: 1, seg: 0, kind: 'final', credits: 1.5, at: T0 });
      u.ledger.setUpstreamSessionId('m2', 'up-b', 1);
      u.ledger.recordUsage({ sessionKey: 'm2', seq: 2, seg: 1, kind: 'delta', credits: 0.2, at: T0 });
      u.ledger.recordUsage({ sessionKey: 'm2', seq: 3, seg: 1, kind: 'delta', credits: 0.1, at: T0 });
      u.ledger.sessionEnded({ sessionKey: 'm2', outcome: 'upstream_lost', mediaSeconds: 9, endedAt: T0 + 9000 });
      await u.ledger.flush();
      const s = await session(u, 'm2');
      assert.deepEqual([s.credits, s.estimated, s.outcome], [1.8, true, 'upstream_lost']);
      assert.deepEqual(s.segments, [
        { upstreamSessionId: 'up-a', credits: 1.5, estimated: false },
        { upstreamSessionId: 'up-b', credits: 0.3, estimated: true },
      ]);
      assert.equal(await total(u), 1.8);
      await u.close();
    });

    test('a repeated seq counts once, whichever segment it names; out-of-range segments are refused', async () => {
      const u = await make();
      const events = () => {
        u.ledger.sessionStarted({ sessionKey: 'm3', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
        u.ledger.recordUsage({ sessionKey: 'm3', seq: 1, seg: 0, kind: 'final', credits: 2, at: T0 });
        u.ledger.recordUsage({ sessionKey: 'm3', seq: 2, seg: 1, kind: 'delta', credits: 0.5, at: T0 });
      };
      events();
      await u.ledger.flush();
      events();
      u.ledger.recordUsage({ sessionKey: 'm3', seq: 2, seg: 2, kind: 'delta', credits: 0.5, at: T0 });
      for (const seg of [-1, 1.5, 256, Number.NaN])
        u.ledger.recordUsage({ sessionKey: 'm3', seq: 9, seg, kind: 'final', credits: 7, at: T0 });
      u.ledger.setUpstreamSessionId('m3', 'up-x', 1e9);
      await u.ledger.flush();
      const s = await session(u, 'm3');
      assert.deepEqual([s.credits, s.estimated, s.upstreamSessionId], [2.5, true, null]);
      assert.deepEqual(
        s.segments.map((g: { credits: number }) => g.credits),
        [2, 0.5],
      );
      assert.equal(await total(u), 2.5);
      await u.close();
    });
  });
}

test('old events without seg are segment 0 in both stores, and a corrupt segment is refused without harm', async () => {
  const retention = 30 * DAY;
  const client = createRedisClient({ url: redis.url });
  await client.connect();
  const stores: UsageStore[] = [
    new RedisUsageStore(client, uniquePrefix(), retention, Date.now),
    new MemoryUsageStore(retention, Date.now),
  ];
  // As the version before segments wrote them, then the new version's next segment.
  const events = [
    { t: 'start', k: 'o1', tenant: 'acme', endpoint: 'transcribe', at: T0 },
    { t: 'upstream', k: 'o1', usid: 'up-old' },
    { t: 'usage', k: 'o1', seq: 1, kind: 'delta', micro: 300_000, at: T0 },
    { t: 'usage', k: 'o1', seq: 2, kind: 'final', micro: 250_000, at: T0 },
    { t: 'upstream', k: 'o1', usid: 'up-new', seg: 1 },
    { t: 'usage', k: 'o1', seq: 3, seg: 1, kind: 'final', micro: 125_000, at: T0 },
    { t: 'usage', k: 'o1', seq: 4, seg: 1e9, kind: 'final', micro: 9_000_000, at: T0 }, // a damaged line
    { t: 'end', k: 'o1', outcome: 'ended', mediaMs: 5000, at: T0 + 5000 },
  ] as LedgerEvent[];
  const answers = [];
  for (const store of stores) {
    await store.apply(events);
    const { rows } = await store.sessions({
      tenant: 'acme',
      from: 0,
      to: Number.MAX_SAFE_INTEGER,
      after: null,
      limit: 10,
    });
    const buckets = await store.buckets({
      tenant: 'acme',
      endpoints: ['transcribe'],
      granularity: 'day',
      from: 0,
      to: Number.MAX_SAFE_INTEGER,
    });
    answers.push({ rows, buckets });
  }
  const [fromRedis, inProcess] = answers;
  assert.deepEqual(fromRedis, inProcess);
  const [row] = fromRedis.rows;
  assert.deepEqual([row.micro, row.estimated, row.upstreamSessionId], [375_000, false, 'up-old']);
  assert.deepEqual(row.segments, [
    { upstreamSessionId: 'up-old', micro: 250_000, estimated: false },
    { upstreamSessionId: 'up-new', micro: 125_000, estimated: false },
  ]);
  assert.equal(fromRedis.buckets[0].micro, 375_000);
  client.disconnect();
});

test('a journal replayed over events Redis already has (and old lines without seg) counts each once', async () => {
  const prefix = uniquePrefix();
  const first = await createUsage(usageOptions({ redis: { url: redis.url }, keyPrefix: prefix }));
  first.ledger.sessionStarted({ sessionKey: 'j1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
  first.ledger.setUpstreamSessionId('j1', 'up-a', 0);
  first.ledger.recordUsage({ sessionKey: 'j1', seq: 1, seg: 0, kind: 'delta', credits: 1, at: T0 });
  await first.close();
  // A crash after Redis took these but before the journal was cleared: the next start replays them,
  // old-format lines first (no seg), then the new segment.
  const dir = tempDir();
  const lines = [
    { t: 'start', k: 'j1', tenant: 'acme', endpoint: 'transcribe', at: T0 },
    { t: 'upstream', k: 'j1', usid: 'up-a' },
    { t: 'usage', k: 'j1', seq: 1, kind: 'delta', micro: 1_000_000, at: T0 },
    { t: 'usage', k: 'j1', seq: 2, kind: 'final', micro: 1_500_000, at: T0 },
    { t: 'upstream', k: 'j1', usid: 'up-b', seg: 1 },
    { t: 'usage', k: 'j1', seq: 3, seg: 1, kind: 'delta', micro: 400_000, at: T0 },
  ];
  writeFileSync(
    join(dir, 'usage-journal.jsonl'),
    lines
      .map((l) => JSON.stringify(l) + '\n')
      .join('')
      .repeat(2),
  );
  const second = await createUsage(usageOptions({ redis: { url: redis.url }, keyPrefix: prefix, journalDir: dir }));
  await until(() => second.ledger.journalDepth === 0, 'journal replay');
  const s = await session(second, 'j1');
  assert.deepEqual([s.credits, s.estimated], [1.9, true]);
  assert.deepEqual(s.segments, [
    { upstreamSessionId: 'up-a', credits: 1.5, estimated: false },
    { upstreamSessionId: 'up-b', credits: 0.4, estimated: true },
  ]);
  assert.deepEqual((await get(second.api, `/v1/usage?tenant=acme&${RANGE}`)).body.total, {
    credits: 1.9,
    sessions: 1,
    mediaSeconds: 0,
    ...NO_SPEECH,
  });
  await second.close();
});
