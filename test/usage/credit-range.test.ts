// Credit figures the upstream sends are range-checked before they reach any total: below 0 or
// above MAX_CREDITS_PER_MESSAGE they are refused (counted, the session marked estimated), and
// every stored total stays an exact integer below 2^53. The Lua scripts check everything before
// their first write, so a refused event leaves the session, its buckets and its `end` intact;
// the in-process store does the same.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { metrics } from '../../src/telemetry/index.js';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { MemoryUsageStore } from '../../src/usage/memory-store.js';
import {
  MAX_CREDITS_PER_MESSAGE,
  MAX_MICRO_PER_MESSAGE,
  type LedgerEvent,
  type UsageStore,
} from '../../src/usage/model.js';
import { RedisUsageStore, createRedisClient, type ScriptedRedis } from '../../src/usage/redis-store.js';
import { NO_SPEECH, get, uniquePrefix, usageOptions } from '../support/usage.js';
import { startRedis, type TestRedis } from './redis.js';

const DAY = 86_400_000;
const T0 = Math.floor(Date.now() / DAY) * DAY - DAY + 3_600_000; // yesterday 01:00 UTC
const RANGE = `from=${new Date(T0 - DAY).toISOString()}&to=${new Date(T0 + DAY).toISOString()}&granularity=day`;
const BAD = [-1000, 1e13, 1e300, Number.POSITIVE_INFINITY, Number.NaN];

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const refused = async (reason: string) =>
  (await metrics.usageRefused.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

const totals = async (u: Usage) => (await get(u.api, `/v1/usage?tenant=acme&${RANGE}`)).body.total;
const sessions = async (u: Usage) => (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions;

for (const mode of ['redis', 'in-process'] as const) {
  describe(`credits out of range (${mode})`, () => {
    const make = () =>
      createUsage(usageOptions(mode === 'redis' ? { redis: { url: redis.url }, keyPrefix: uniquePrefix() } : {}));

    test('-1000, 1e13, 1e300 never reach a total; the session is estimated and its end recorded', async () => {
      const u = await make();
      const before = [await refused('out_of_range'), await refused('unreadable')];
      u.ledger.sessionStarted({ sessionKey: 'r1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
      assert.equal(u.ledger.recordUsage({ sessionKey: 'r1', seq: 1, kind: 'delta', credits: 0.5, at: T0 }), true);
      let seq = 1;
      for (const credits of BAD) {
        for (const kind of ['delta', 'final'] as const) {
          assert.equal(
            u.ledger.recordUsage({ sessionKey: 'r1', seq: ++seq, kind, credits, at: T0 }),
            false,
            `${kind} ${credits}`,
          );
        }
      }
      // The bound itself is a figure like any other.
      assert.equal(
        u.ledger.recordUsage({ sessionKey: 'r2', seq: 1, kind: 'final', credits: MAX_CREDITS_PER_MESSAGE, at: T0 }),
        true,
      );
      u.ledger.sessionEnded({ sessionKey: 'r1', outcome: 'ended', mediaSeconds: 5, endedAt: T0 + 5000 });
      await u.ledger.flush();
      assert.deepEqual([await refused('out_of_range'), await refused('unreadable')], [before[0] + 8, before[1] + 2]);
      assert.deepEqual(await totals(u), { credits: 0.5, sessions: 1, mediaSeconds: 5, ...NO_SPEECH });
      const [row] = await sessions(u);
      assert.deepEqual(
        [row.sessionKey, row.credits, row.estimated, row.outcome, row.end !== null],
        ['r1', 0.5, true, 'ended', true],
      );
      await u.close();
    });

    test('a session of in-range figures whose total would pass 2^53 micro-credits keeps the last total that fitted', async () => {
      const u = await make();
      const before = await refused('overflow');
      u.ledger.sessionStarted({ sessionKey: 'big', tenant: 'acme', endpoint: 'streams', startedAt: T0 });
      // 9008 deltas of 1e6 credits are 9.008e15 micro-credits: over 2^53 - 1 at the last one.
      for (let seq = 1; seq <= 9008; seq++)
        u.ledger.recordUsage({ sessionKey: 'big', seq, kind: 'delta', credits: MAX_CREDITS_PER_MESSAGE, at: T0 });
      u.ledger.sessionEnded({ sessionKey: 'big', outcome: 'ended', mediaSeconds: 1, endedAt: T0 + 1000 });
      await u.ledger.flush();
      const [row] = await sessions(u);
      assert.equal(row.credits, 9007 * MAX_CREDITS_PER_MESSAGE);
      assert.deepEqual([row.estimated, row.outcome], [true, 'ended']);
      assert.equal((await totals(u)).credits, row.credits, '/v1/usage and /v1/usage/sessions agree');
      assert.equal(await refused('overflow'), before + 1);
      await u.close();
    });
  });
}

describe('the stores check every event whole before writing (Lua scripts and in process alike)', () => {
  const retention = 30 * DAY;
  let client: ScriptedRedis;
  beforeAll(async () => {
    client = createRedisClient({ url: redis.url });
    await client.connect();
  });
  afterAll(() => client.disconnect());

  const start: LedgerEvent = { t: 'start', k: 'w1', tenant: 'acme', endpoint: 'transcribe', at: T0 };
  const good: LedgerEvent[] = [start, { t: 'usage', k: 'w1', seq: 1, kind: 'delta', micro: 250_000, at: T0 }];
  // Events a damaged journal line or a bug could carry: each must change nothing.
  const hostile = [
    { t: 'usage', k: 'w1', seq: 2, kind: 'delta', micro: -1_000_000_000, at: T0 },
    { t: 'usage', k: 'w1', seq: 3, kind: 'final', micro: 1e19, at: T0 },
    { t: 'usage', k: 'w1', seq: 4, kind: 'final', micro: 1e306, at: T0 },
    { t: 'usage', k: 'w1', seq: 5, kind: 'delta', micro: 0.5, at: T0 },
    { t: 'usage', k: 'w1', seq: 6, kind: 'bogus', micro: 1, at: T0 },
    { t: 'usage', k: 'w1', seq: 7.5, kind: 'delta', micro: 1, at: T0 },
    { t: 'end', k: 'w1', outcome: 'ended', mediaMs: 1e19, at: T0 + 1 },
    { t: 'end', k: 'w1', outcome: 'ended', mediaMs: -5, at: T0 + 1 },
  ] as unknown as LedgerEvent[];
  const end: LedgerEvent = { t: 'end', k: 'w1', outcome: 'ended', mediaMs: 4000, at: T0 + 4000 };

  async function state(store: UsageStore) {
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
    return { rows, buckets };
  }

  test('a negative or overflowing figure, a bad kind or seq, a huge end: nothing written, the real end still lands', async () => {
    const prefix = uniquePrefix();
    const stores: UsageStore[] = [
      new RedisUsageStore(client, prefix, retention, Date.now),
      new MemoryUsageStore(retention, Date.now),
    ];
    const answers = [];
    for (const store of stores) {
      await store.apply(good);
      const before = await state(store);
      const hashBefore = await client.hgetall(`${prefix}s:w1`);
      for (const e of hostile) await store.apply([e]);
      const after = await state(store);
      // Only the mark that makes the session estimated may differ.
      assert.deepEqual({ ...after.rows[0], estimated: false }, { ...before.rows[0], estimated: false });
      assert.equal(after.rows[0].estimated, true);
      assert.deepEqual(after.buckets, before.buckets);
      if (store instanceof RedisUsageStore) {
        const { refused: mark, ...rest } = await client.hgetall(`${prefix}s:w1`);
        assert.equal(mark, '1');
        assert.deepEqual(rest, hashBefore, 'no field of the session hash changed');
      }
      await store.apply([end]);
      answers.push(await state(store));
    }
    const [fromRedis, inProcess] = answers;
    assert.deepEqual(fromRedis, inProcess);
    const [row] = fromRedis.rows;
    assert.deepEqual([row.micro, row.end, row.mediaMs, row.estimated], [250_000, T0 + 4000, 4000, true]);
    assert.deepEqual(
      fromRedis.buckets.map((b) => [b.micro, b.sessions, b.mediaMs]),
      [[250_000, 1, 4000]],
    );
  });

  test('a day bucket filled to 2^53 - 1 by many sessions refuses the figure that would pass it, in both stores', async () => {
    const prefix = uniquePrefix();
    const events = (k: string, micro: number): LedgerEvent[] => [
      { t: 'start', k, tenant: 'acme', endpoint: 'streams', at: T0 },
      { t: 'usage', k, seq: 1, kind: 'final', micro, at: T0 },
      { t: 'end', k, outcome: 'ended', mediaMs: 10, at: T0 + 10 },
    ];
    // 9007 sessions of the largest figure leave room for 199 254 740 991 micro-credits.
    const fill = Array.from({ length: 9007 }, (_, i) => events(`a${i}`, MAX_MICRO_PER_MESSAGE)).flat();
    const room = Number.MAX_SAFE_INTEGER - 9007 * MAX_MICRO_PER_MESSAGE;
    const stores: UsageStore[] = [
      new RedisUsageStore(client, prefix, retention, Date.now),
      new MemoryUsageStore(retention, Date.now),
    ];
    const answers = [];
    for (const store of stores) {
      for (let i = 0; i < fill.length; i += 3000) await store.apply(fill.slice(i, i + 3000));
      await store.apply(events('z1', room + 1)); // would make the bucket 2^53
      await store.apply(events('z2', room)); // fits exactly
      const { rows } = await store.sessions({
        tenant: 'acme',
        from: 0,
        to: Number.MAX_SAFE_INTEGER,
        after: { start: T0, key: 'y' },
        limit: 10,
      });
      const buckets = await store.buckets({
        tenant: 'acme',
        endpoints: ['streams'],
        granularity: 'day',
        from: 0,
        to: Number.MAX_SAFE_INTEGER,
      });
      answers.push({ rows: rows.map((r) => [r.sessionKey, r.micro, r.estimated, r.end]), buckets });
    }
    const [fromRedis, inProcess] = answers;
    assert.deepEqual(fromRedis, inProcess);
    assert.deepEqual(fromRedis.rows, [
      ['z1', 0, true, T0 + 10],
      ['z2', room, false, T0 + 10],
    ]);
    assert.deepEqual(
      fromRedis.buckets.map((b) => [b.micro, b.sessions, b.mediaMs]),
      [[Number.MAX_SAFE_INTEGER, 9009, 9009 * 10]],
    );
  });
});
