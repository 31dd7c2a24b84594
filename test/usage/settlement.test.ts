// The ledger's two settlement steps (lua.ts), on one Redis and on a Redis Cluster: a crash between
// them is completed by the journal's replay (the session step answers "done" and its state, the tenant
// step runs), a stale tenant step changes nothing, and tenant ids with braces (which would break a hash
// tag) are tagged by a digest and settle in one slot all the same.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import type { RedisSettings } from '../../src/redis/index.js';
import { sessionKey, tenantBase } from '../../src/usage/keys.js';
import type { LedgerEvent, UsageStore } from '../../src/usage/model.js';
import { RedisUsageStore, createRedisClient, type ScriptedRedis } from '../../src/usage/redis-store.js';
import { uniquePrefix } from '../support/usage.js';
import { startRedis, type TestRedis } from './redis.js';
import { startCluster, type TestCluster } from './redis-cluster.js';

const DAY = 86_400_000;
const T = Math.floor(Date.now() / DAY) * DAY - DAY + 3_600_000; // yesterday 01:00 UTC
const RETENTION = 30 * DAY;

const totals = async (store: UsageStore, tenant: string) => {
  const rows = await store.buckets({ tenant, endpoints: ['transcribe'], granularity: 'day', from: 0, to: T + DAY });
  const page = await store.sessions({ tenant, from: 0, to: T + DAY, after: null, limit: 10 });
  return {
    buckets: rows.map((r) => [r.micro, r.sessions, r.mediaMs]),
    sessions: page.rows.map((r) => [r.sessionKey, r.micro, r.estimated]),
  };
};

for (const mode of ['redis', 'redis cluster'] as const) {
  describe(`settlement in two steps (${mode})`, () => {
    let redis: TestRedis | undefined;
    let cluster: TestCluster | undefined;
    let client: ScriptedRedis;
    beforeAll(async () => {
      let settings: RedisSettings;
      if (mode === 'redis') {
        redis = await startRedis();
        settings = { url: redis.url };
      } else {
        cluster = await startCluster();
        settings = { clusterNodes: [{ host: '127.0.0.1', port: cluster.ports[0] }] };
      }
      client = createRedisClient(settings);
      await client.connect();
    }, 60_000);
    afterAll(async () => {
      client.disconnect();
      cluster?.stop();
      await redis?.stop();
    });

    test('a crash after the session step: the replay settles the tenant, once', async () => {
      const prefix = uniquePrefix();
      const store = new RedisUsageStore(client, prefix, RETENTION, () => T);
      const events: LedgerEvent[] = [
        { t: 'start', k: 'c1', tenant: 'acme', endpoint: 'transcribe', at: T },
        { t: 'usage', k: 'c1', seq: 1, seg: 0, kind: 'delta', micro: 1234, at: T },
        { t: 'end', k: 'c1', outcome: 'ended', mediaMs: 700, at: T + 1 },
      ];
      // Only the session steps ran (the process died before the tenant steps).
      const sk = sessionKey(prefix, 'c1');
      await client.usageStart(sk, T, RETENTION, 'c1', 'acme', 'transcribe', T, '', '');
      await client.usageUsage(sk, T, RETENTION, 0, 1, 'delta', 1234);
      await client.usageEnd(sk, T, RETENTION, 'ended', 700, T + 1);
      assert.deepEqual((await totals(store, 'acme')).buckets, [], 'nothing settled yet');
      // The journal replays the events: every session step answers "done", the tenant steps run.
      await store.apply(events);
      const want = { buckets: [[1234, 1, 700]], sessions: [['c1', 1234, true]] };
      assert.deepEqual(await totals(store, 'acme'), want);
      await store.apply(events);
      await store.apply(events.slice(1, 2));
      assert.deepEqual(await totals(store, 'acme'), want, 'replays change nothing');
    });

    test('a stale tenant step (an older version of the session) changes nothing', async () => {
      const prefix = uniquePrefix();
      const store = new RedisUsageStore(client, prefix, RETENTION, () => T);
      await store.apply([
        { t: 'start', k: 'v1', tenant: 'acme', endpoint: 'transcribe', at: T },
        { t: 'usage', k: 'v1', seq: 1, seg: 0, kind: 'delta', micro: 100, at: T },
        { t: 'usage', k: 'v1', seq: 2, seg: 0, kind: 'final', micro: 40, at: T },
      ]);
      const base = tenantBase(prefix, 'acme');
      const d = T - (T % DAY);
      const h = T - (T % 3_600_000);
      const keys = [`${base}b:transcribe:h:${h}`, `${base}b:transcribe:d:${d}`];
      const tenantKeys = [...keys, `${base}bi:transcribe:h`, `${base}bi:transcribe:d`, `${base}credits`];
      // Version 2 said 100 credits; version 3 (the final) says 40 and is settled.
      const stale = await client.usageSettle(
        ...tenantKeys,
        `${base}a:${d}`,
        `${base}ts`,
        T,
        RETENTION,
        'v1',
        2,
        100,
        0,
        0,
        0,
        0,
        T,
        h,
        d,
      );
      assert.equal(stale, 0);
      assert.deepEqual((await totals(store, 'acme')).buckets, [[40, 1, 0]]);
    });

    test('tenant ids with braces are tagged by a digest and settle like any other', async () => {
      const prefix = uniquePrefix();
      const store = new RedisUsageStore(client, prefix, RETENTION, () => T);
      const odd = ['a{b}c', 'x}y', '{'];
      for (const [i, tenant] of odd.entries()) {
        assert.match(tenantBase(prefix, tenant), /\{t#[0-9a-f]{16}\}:/);
        await store.apply([
          { t: 'start', k: `o${i}`, tenant, endpoint: 'transcribe', at: T },
          { t: 'usage', k: `o${i}`, seq: 1, seg: 0, kind: 'final', micro: 10 + i, at: T },
        ]);
      }
      for (const [i, tenant] of odd.entries())
        assert.deepEqual(await totals(store, tenant), {
          buckets: [[10 + i, 1, 0]],
          sessions: [[`o${i}`, 10 + i, false]],
        });
      assert.deepEqual(await store.tenants(), [...odd].sort());
    });
  });
}
