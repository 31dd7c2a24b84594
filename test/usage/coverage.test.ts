// A session's speech coverage in the usage ledger: the speech it forwarded, the part its finals
// cover and its gaps, in its row (/v1/usage/sessions) and added up per bucket and range (/v1/usage),
// the same on one Redis, a Redis Cluster and in process. Older events (journal lines written before
// coverage) and sessions that never went live have none; figures out of range, in an event or read
// back from Redis, count as none.
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { Redis } from 'ioredis';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { sessionKey, tenantBase } from '../../src/usage/keys.js';
import { MemoryUsageStore } from '../../src/usage/memory-store.js';
import type { LedgerEvent, UsageStore } from '../../src/usage/model.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { get, uniquePrefix, usageOptions } from '../support/usage.js';
import { redisAndClusterForFile } from './redis-cluster.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const D1 = Math.floor(Date.now() / DAY) * DAY - 2 * DAY; // two days ago, 00:00 UTC
const T0 = D1 + 10 * HOUR + 15 * 60_000; // 10:15
const iso = (t: number) => new Date(t).toISOString();
const range = (from: number, to: number, g: 'hour' | 'day') => `from=${iso(from)}&to=${iso(to)}&granularity=${g}`;

/** Two sessions with speech, one ended before it went live (no coverage), one still open. */
function record(u: Usage, tenant = 'acme'): void {
  const start = (k: string, at: number) =>
    u.ledger.sessionStarted({ sessionKey: k, tenant, endpoint: 'transcribe', startedAt: at });
  start('c1', T0);
  u.ledger.recordUsage({ sessionKey: 'c1', seq: 1, kind: 'final', credits: 1, at: T0 });
  const c1 = {
    sessionKey: 'c1',
    outcome: 'ended' as const,
    mediaSeconds: 60,
    endedAt: T0 + 61_000,
    coverage: {
      speechSeconds: 40.5,
      coveredSeconds: 35,
      gaps: [
        { start: 12, end: 15.5, speechSeconds: 3.25 },
        { start: 30.25, end: 33, speechSeconds: 2.25 },
      ],
      moreGaps: 0,
    },
  };
  u.ledger.sessionEnded(c1);
  u.ledger.sessionEnded(c1); // told twice (a replay): counted once
  start('c2', T0 + 60_000);
  u.ledger.sessionEnded({
    sessionKey: 'c2',
    outcome: 'client_gone',
    mediaSeconds: 12,
    endedAt: T0 + 80_000,
    coverage: { speechSeconds: 10, coveredSeconds: 10, gaps: [], moreGaps: 0 },
  });
  start('c3', T0 + 120_000);
  u.ledger.sessionEnded({ sessionKey: 'c3', outcome: 'config_denied', mediaSeconds: 0, endedAt: T0 + 121_000 });
  start('c4', T0 + 180_000);
}

const figures = (s: Record<string, unknown>) => ({
  speechSeconds: s.speechSeconds,
  transcribedSpeechSeconds: s.transcribedSpeechSeconds,
  coverage: s.coverage,
});

const servers = redisAndClusterForFile();

const modes = {
  redis: () => ({ redis: { url: servers.redis.url }, keyPrefix: uniquePrefix() }),
  'redis cluster': () => ({
    redis: { clusterNodes: [{ host: '127.0.0.1', port: servers.cluster.ports[0] }] },
    keyPrefix: uniquePrefix(),
  }),
  'in-process': () => ({}),
};

for (const [mode, settings] of Object.entries(modes)) {
  describe(`speech coverage in the ledger (${mode})`, () => {
    test('a session row shows its speech, the part transcribed, the ratio and its gaps', async () => {
      const u = await createUsage(usageOptions({ ...settings(), now: () => T0 }));
      record(u);
      await u.ledger.flush();
      const rows = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions as Record<string, unknown>[];
      const by = new Map(rows.map((r) => [r.sessionKey, r]));
      const c1 = by.get('c1')!;
      assert.deepEqual(
        { ...figures(c1), gaps: c1.gaps, moreGaps: c1.moreGaps },
        {
          speechSeconds: 40.5,
          transcribedSpeechSeconds: 35,
          coverage: 0.864198, // 35 / 40.5
          gaps: [
            { start: 12, end: 15.5, speechSeconds: 3.25 },
            { start: 30.25, end: 33, speechSeconds: 2.25 },
          ],
          moreGaps: 0,
        },
      );
      assert.deepEqual(figures(by.get('c2')!), { speechSeconds: 10, transcribedSpeechSeconds: 10, coverage: 1 });
      for (const k of ['c3', 'c4']) {
        const none = by.get(k)!;
        assert.deepEqual(
          { ...figures(none), gaps: none.gaps, moreGaps: none.moreGaps },
          {
            speechSeconds: null,
            transcribedSpeechSeconds: null,
            coverage: null,
            gaps: [],
            moreGaps: 0,
          },
        );
      }
      await u.close();
    });

    test('/v1/usage adds speech and transcribed speech per bucket and in total, on and off bucket edges', async () => {
      const u = await createUsage(usageOptions({ ...settings(), now: () => T0 }));
      record(u);
      // Another hour, another day: a session with speech none of its finals covered.
      u.ledger.sessionStarted({ sessionKey: 'n1', tenant: 'acme', endpoint: 'streams', startedAt: T0 + DAY + HOUR });
      u.ledger.sessionEnded({
        sessionKey: 'n1',
        outcome: 'upstream_lost',
        mediaSeconds: 9,
        endedAt: T0 + DAY + HOUR + 9000,
        coverage: {
          speechSeconds: 4.5,
          coveredSeconds: 0,
          gaps: [{ start: 0, end: 5, speechSeconds: 4.5 }],
          moreGaps: 0,
        },
      });
      await u.ledger.flush();
      const want = { speechSeconds: 50.5, transcribedSpeechSeconds: 45, coverage: 0.891089 }; // 45 / 50.5
      const byHour = await get(u.api, `/v1/usage?tenant=acme&${range(D1, D1 + 3 * DAY, 'hour')}`);
      assert.equal(byHour.status, 200);
      assert.deepEqual(byHour.body.buckets.map(figures), [
        want,
        { speechSeconds: 4.5, transcribedSpeechSeconds: 0, coverage: 0 },
      ]);
      assert.deepEqual(figures(byHour.body.total), {
        speechSeconds: 55,
        transcribedSpeechSeconds: 45,
        coverage: 0.818182,
      });
      const byDay = await get(u.api, `/v1/usage?tenant=acme&${range(D1, D1 + 3 * DAY, 'day')}&endpoint=transcribe`);
      assert.deepEqual(byDay.body.buckets.map(figures), [want]);
      // 10:10 to 10:20, and 09:30 to the next day 00:30: the edges from the session records.
      for (const [from, to] of [
        [T0 - 5 * 60_000, T0 + 5 * 60_000],
        [D1 + 9.5 * HOUR, D1 + DAY + 0.5 * HOUR],
      ]) {
        const cut = await get(u.api, `/v1/usage?tenant=acme&${range(from, to, 'day')}`);
        assert.deepEqual(figures(cut.body.total), want, `${iso(from)} to ${iso(to)}`);
      }
      // A range with sessions but no speech measured: no ratio.
      const none = await get(u.api, `/v1/usage?tenant=acme&${range(T0 + 110_000, T0 + 200_000, 'hour')}`);
      assert.deepEqual(figures(none.body.total), { speechSeconds: 0, transcribedSpeechSeconds: 0, coverage: null });
      assert.equal(none.body.total.sessions, 2);
      await u.close();
    });

    test('figures the ledger cannot trust are bounded or dropped, never stored as told', async () => {
      const u = await createUsage(usageOptions({ ...settings(), now: () => T0 }));
      const end = (k: string, coverage: unknown) => {
        u.ledger.sessionStarted({ sessionKey: k, tenant: 'odd', endpoint: 'transcribe', startedAt: T0 });
        u.ledger.sessionEnded({ sessionKey: k, outcome: 'ended', mediaSeconds: 1, endedAt: T0 + 1, coverage } as never);
      };
      const gap = (i: number) => ({ start: 10 * i, end: 10 * i + 3, speechSeconds: 2.5 });
      end('many', {
        speechSeconds: 500,
        coveredSeconds: 100,
        gaps: Array.from({ length: 130 }, (_, i) => gap(i)),
        moreGaps: 7,
      });
      end('over', {
        speechSeconds: 5,
        coveredSeconds: 6,
        gaps: [{ start: 1, end: 3, speechSeconds: 2.5 }],
        moreGaps: 0,
      });
      end('nan', { speechSeconds: Number.NaN, coveredSeconds: 1, gaps: [], moreGaps: 0 });
      end('neg', { speechSeconds: 5, coveredSeconds: -1, gaps: [], moreGaps: 0 });
      end('junk', {
        speechSeconds: 5,
        coveredSeconds: 5,
        gaps: [{ start: 'x' }, null, { start: 4, end: 2, speechSeconds: 1 }],
        moreGaps: -3,
      });
      await u.ledger.flush();
      const rows = (await get(u.api, '/v1/usage/sessions?tenant=odd')).body.sessions as Record<string, any>[];
      const by = new Map(rows.map((r) => [r.sessionKey, r]));
      const many = by.get('many')!;
      assert.equal(many.gaps.length, 100);
      assert.deepEqual(many.gaps[99], { start: 990, end: 993, speechSeconds: 2.5 });
      assert.equal(many.moreGaps, 37, 'the 30 past 100 and the 7 told');
      // Covered past the speech is all of it; a gap's speech is at most its span.
      assert.deepEqual(figures(by.get('over')!), { speechSeconds: 5, transcribedSpeechSeconds: 5, coverage: 1 });
      assert.deepEqual(by.get('over')!.gaps, [{ start: 1, end: 3, speechSeconds: 2 }]);
      for (const k of ['nan', 'neg'])
        assert.deepEqual(
          figures(by.get(k)!),
          { speechSeconds: null, transcribedSpeechSeconds: null, coverage: null },
          k,
        );
      assert.deepEqual([by.get('junk')!.gaps, by.get('junk')!.moreGaps], [[], 0]);
      assert.equal(by.get('nan')!.outcome, 'ended', 'the end itself is recorded');
      await u.close();
    });
  });
}

const allOf = async (store: UsageStore, tenant: string) => ({
  rows: (await store.sessions({ tenant, from: 0, to: Number.MAX_SAFE_INTEGER, after: null, limit: 10 })).rows,
  buckets: await store.buckets({
    tenant,
    endpoints: ['transcribe'],
    granularity: 'day',
    from: 0,
    to: Number.MAX_SAFE_INTEGER,
  }),
});

test('journal lines from before coverage, and events with figures out of range, apply alike in Redis and in process', async () => {
  const client = createRedisClient({ url: servers.redis.url });
  await client.connect();
  const stores: UsageStore[] = [
    new RedisUsageStore(client, uniquePrefix(), 30 * DAY, Date.now),
    new MemoryUsageStore(30 * DAY, Date.now),
  ];
  const events = [
    { t: 'start', k: 'old', tenant: 'acme', endpoint: 'transcribe', at: T0 },
    { t: 'end', k: 'old', outcome: 'ended', mediaMs: 5000, at: T0 + 5000 }, // as the release before wrote it
    { t: 'start', k: 'new', tenant: 'acme', endpoint: 'transcribe', at: T0 + 1 },
    {
      t: 'end',
      k: 'new',
      outcome: 'ended',
      mediaMs: 3000,
      at: T0 + 3000,
      speechMs: 2500,
      coveredMs: 2000,
      gaps: [[100, 2600, 2100]],
      moreGaps: 1,
    },
    { t: 'start', k: 'bad', tenant: 'acme', endpoint: 'transcribe', at: T0 + 2 },
    // A damaged line: covered past speech, a gap ending before it starts.
    {
      t: 'end',
      k: 'bad',
      outcome: 'ended',
      mediaMs: 1000,
      at: T0 + 1000,
      speechMs: 100,
      coveredMs: 200,
      gaps: [[5, 1, 0]],
      moreGaps: 0,
    },
  ] as LedgerEvent[];
  const answers = [];
  for (const store of stores) {
    await store.apply(events);
    answers.push(await allOf(store, 'acme'));
  }
  assert.deepEqual(answers[0], answers[1]);
  const by = new Map(answers[0].rows.map((r) => [r.sessionKey, r]));
  const cov = (k: string) => {
    const r = by.get(k)!;
    return [r.outcome, r.mediaMs, r.speechMs, r.coveredMs, r.gaps, r.moreGaps];
  };
  assert.deepEqual(cov('old'), ['ended', 5000, null, null, [], 0]);
  assert.deepEqual(cov('new'), ['ended', 3000, 2500, 2000, [[100, 2600, 2100]], 1]);
  assert.deepEqual(cov('bad'), ['ended', 1000, null, null, [], 0], 'the end counts, its coverage does not');
  assert.deepEqual(
    answers[0].buckets.map((b) => [b.sessions, b.mediaMs, b.speechMs, b.coveredMs]),
    [[3, 9000, 2500, 2000]],
  );
  client.disconnect();
});

test('figures read back from Redis are input: out of range, they count as none', async () => {
  const prefix = uniquePrefix();
  const client = createRedisClient({ url: servers.redis.url });
  await client.connect();
  const store = new RedisUsageStore(client, prefix, 30 * DAY, Date.now);
  await store.apply([
    { t: 'start', k: 'r1', tenant: 'acme', endpoint: 'transcribe', at: T0 },
    {
      t: 'end',
      k: 'r1',
      outcome: 'ended',
      mediaMs: 3000,
      at: T0 + 3000,
      speechMs: 2500,
      coveredMs: 2000,
      gaps: [],
      moreGaps: 0,
    },
    { t: 'start', k: 'r2', tenant: 'acme', endpoint: 'transcribe', at: T0 + 1 },
    {
      t: 'end',
      k: 'r2',
      outcome: 'ended',
      mediaMs: 3000,
      at: T0 + 3000,
      speechMs: 2500,
      coveredMs: 2000,
      gaps: [[0, 2600, 500]],
      moreGaps: 0,
    },
  ]);
  const raw = new Redis(servers.redis.url);
  await raw.hset(sessionKey(prefix, 'r1'), 'speechMs', '1e400', 'coveredMs', '-5');
  await raw.hset(sessionKey(prefix, 'r2'), 'gaps', '0,2600,nan,4,9', 'moreGaps', '2.5');
  const day = T0 - (T0 % DAY);
  await raw.hset(
    `${tenantBase(prefix, 'acme')}b:transcribe:d:${day}`,
    'speechMs',
    'x',
    'coveredMs',
    '9007199254740993',
  );
  const { rows, buckets } = await allOf(store, 'acme');
  const by = new Map(rows.map((r) => [r.sessionKey, r]));
  assert.deepEqual([by.get('r1')!.speechMs, by.get('r1')!.coveredMs], [null, null]);
  assert.deepEqual([by.get('r2')!.speechMs, by.get('r2')!.gaps, by.get('r2')!.moreGaps], [2500, [], 0]);
  assert.deepEqual(
    buckets.map((b) => [b.sessions, b.mediaMs, b.speechMs, b.coveredMs]),
    [[2, 6000, 0, 0]],
  );
  raw.disconnect();
  client.disconnect();
});

test('END in Redis takes no coverage out of range, whoever calls it', async () => {
  const prefix = uniquePrefix();
  const client = createRedisClient({ url: servers.redis.url });
  await client.connect();
  const clock = [Date.now(), 30 * DAY];
  const cases: Array<[string, (string | number)[]]> = [
    ['covered past speech', [100, 200, '', 0]],
    ['a gap ending before its start', [100, 50, '9,3,1', 0]],
    ['a gap with more speech than span', [100, 50, '0,3,4', 0]],
    ['a gap of two figures', [100, 50, '0,3', 0]],
    ['a figure that is not one', [100, 50, '0,3,x', 0]],
    ['more gaps than listed may be', [100, 50, Array(101).fill('0,3,1').join(','), 0]],
    ['a negative count', [100, 50, '', -1]],
    ['a fraction', [100.5, 50, '', 0]],
  ];
  const raw = new Redis(servers.redis.url);
  for (const [i, [why, args]] of cases.entries()) {
    const sk = sessionKey(prefix, `e${i}`);
    await client.usageStart(sk, ...clock, `e${i}`, 'acme', 'transcribe', T0, '', '');
    await client.usageEnd(sk, ...clock, 'ended', 1000, T0 + 1000, ...args);
    const h = await raw.hgetall(sk);
    assert.equal(h.outcome, 'ended', why);
    assert.deepEqual([h.speechMs, h.coveredMs, h.gaps, h.moreGaps], [undefined, undefined, undefined, undefined], why);
  }
  const sk = sessionKey(prefix, 'ok');
  await client.usageStart(sk, ...clock, 'ok', 'acme', 'transcribe', T0, '', '');
  await client.usageEnd(sk, ...clock, 'ended', 1000, T0 + 1000, 100, 50, '0,3,1,5,9,4', 2);
  const h = await raw.hgetall(sk);
  assert.deepEqual([h.speechMs, h.coveredMs, h.gaps, h.moreGaps], ['100', '50', '0,3,1,5,9,4', '2']);
  raw.disconnect();
  client.disconnect();
});
