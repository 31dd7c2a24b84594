// Ledger semantics, the same in Redis and in process: final replaces provisional, estimated
// sessions keep their deltas, replays are no-ops, replicas add up, hour/day buckets, retention.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { Redis } from 'ioredis';
import { createUsage, type UsageOptions } from '../../src/usage/index.js';
import { NO_COVERAGE, NO_SPEECH, TOKEN, get, tempDir, uniquePrefix } from '../support/usage.js';
import { startRedis, type TestRedis } from './redis.js';
import { startCluster, type TestCluster } from './redis-cluster.js';

// Redis expires keys by its own clock, so the test's days are recent ones: D1 is two days ago (UTC).
const DAY = 86_400_000;
const D1 = Math.floor(Date.now() / DAY) * DAY - 2 * DAY;
const at = (day: number, hhmmss: string): number => D1 + (day - 1) * DAY + Date.parse(`1970-01-01T${hhmmss}Z`);
const iso = (day: number, hhmmss: string): string => new Date(at(day, hhmmss)).toISOString();
const T0 = at(1, '10:15:00');
const RANGE = `from=${iso(1, '00:00:00')}&to=${iso(3, '00:00:00')}`;

for (const mode of ['redis', 'redis cluster', 'in-process'] as const) {
  describe(`usage ledger (${mode})`, () => {
    let redis: TestRedis | null = null;
    let cluster: TestCluster | null = null;
    beforeAll(async () => {
      if (mode === 'redis') redis = await startRedis();
      if (mode === 'redis cluster') cluster = await startCluster();
    }, 60_000);
    afterAll(async () => {
      cluster?.stop();
      await redis?.stop();
    });

    const make = (extra: Partial<UsageOptions> = {}, prefix = uniquePrefix()) =>
      createUsage({
        redis: redis
          ? { url: redis.url }
          : cluster
            ? { clusterNodes: [{ host: '127.0.0.1', port: cluster.ports[0] }] }
            : undefined,
        journalDir: tempDir(),
        retentionDays: 30,
        maxSessionsPerTenant: 0,
        apiToken: TOKEN,
        keyPrefix: prefix,
        now: () => T0,
        ...extra,
      });

    test('the final figure replaces the provisional deltas', async () => {
      const u = await make();
      u.ledger.sessionStarted({ sessionKey: 's1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
      u.ledger.setUpstreamSessionId('s1', 'up-1');
      u.ledger.recordUsage({ sessionKey: 's1', seq: 1, kind: 'delta', credits: 0.1, at: T0 + 1000 });
      u.ledger.recordUsage({ sessionKey: 's1', seq: 2, kind: 'delta', credits: 0.2, at: T0 + 2000 });
      u.ledger.recordUsage({ sessionKey: 's1', seq: 3, kind: 'final', credits: 0.25, at: T0 + 3000 });
      u.ledger.sessionEnded({ sessionKey: 's1', outcome: 'ended', mediaSeconds: 12.5, endedAt: T0 + 4000 });
      await u.ledger.flush();

      const usage = await get(u.api, `/v1/usage?tenant=acme&${RANGE}&granularity=hour`);
      assert.equal(usage.status, 200);
      assert.deepEqual(usage.body.total, { credits: 0.25, sessions: 1, mediaSeconds: 12.5, ...NO_SPEECH });
      const sessions = await get(u.api, '/v1/usage/sessions?tenant=acme');
      assert.deepEqual(sessions.body, {
        sessions: [
          {
            sessionKey: 's1',
            upstreamSessionId: 'up-1',
            tenant: 'acme',
            endpoint: 'transcribe',
            interactionId: null,
            environment: null,
            start: iso(1, '10:15:00'),
            end: iso(1, '10:15:04'),
            credits: 0.25,
            estimated: false,
            outcome: 'ended',
            mediaSeconds: 12.5,
            ...NO_COVERAGE,
            segments: [{ upstreamSessionId: 'up-1', credits: 0.25, estimated: false }],
          },
        ],
        next: null,
      });
      await u.close();
    });

    test('a session that ends without a final figure keeps its deltas, exactly, marked estimated', async () => {
      const u = await make();
      const iid = '0b6c1e2a-4f7d-4f3e-9a51-2d4c5e6f7a8b';
      u.ledger.sessionStarted({
        sessionKey: 's2',
        tenant: 'acme',
        endpoint: 'streams',
        interactionId: iid,
        startedAt: T0,
      });
      u.ledger.recordUsage({ sessionKey: 's2', seq: 1, kind: 'delta', credits: 0.1, at: T0 });
      u.ledger.recordUsage({ sessionKey: 's2', seq: 2, kind: 'delta', credits: 0.2, at: T0 });
      u.ledger.sessionEnded({ sessionKey: 's2', outcome: 'upstream_lost', mediaSeconds: 3, endedAt: T0 + 5000 });
      await u.ledger.flush();

      const [s] = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions;
      assert.equal(s.credits, 0.3); // 0.1 + 0.2 in floats would be 0.30000000000000004
      assert.equal(s.estimated, true);
      assert.equal(s.outcome, 'upstream_lost');
      assert.equal(s.interactionId, iid);
      const usage = await get(u.api, `/v1/usage?tenant=acme&${RANGE}&granularity=day`);
      assert.deepEqual(usage.body.total, { credits: 0.3, sessions: 1, mediaSeconds: 3, ...NO_SPEECH });
      await u.close();
    });

    test('replaying the same events changes nothing', async () => {
      const u = await make();
      const events = () => {
        u.ledger.sessionStarted({ sessionKey: 's3', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
        u.ledger.recordUsage({ sessionKey: 's3', seq: 1, kind: 'delta', credits: 1.5, at: T0 });
        u.ledger.recordUsage({ sessionKey: 's3', seq: 2, kind: 'delta', credits: 0.75, at: T0 });
        u.ledger.sessionEnded({ sessionKey: 's3', outcome: 'client_gone', mediaSeconds: 9, endedAt: T0 + 1 });
      };
      events();
      events();
      await u.ledger.flush();
      events();
      await u.ledger.flush();
      const usage = await get(u.api, `/v1/usage?tenant=acme&${RANGE}&granularity=hour`);
      assert.deepEqual(usage.body.total, { credits: 2.25, sessions: 1, mediaSeconds: 9, ...NO_SPEECH });
      await u.close();
    });

    test('hour and day buckets by session start, filtered by endpoint', async () => {
      const u = await make();
      const run = (k: string, endpoint: 'transcribe' | 'streams', startedAt: number, credits: number) => {
        const at = startedAt;
        u.ledger.sessionStarted({ sessionKey: k, tenant: 'clinic', endpoint, startedAt: at });
        u.ledger.recordUsage({ sessionKey: k, seq: 1, kind: 'final', credits, at: at + 10 });
        // Ends in the next hour: the bucket is still the start's.
        u.ledger.sessionEnded({ sessionKey: k, outcome: 'ended', mediaSeconds: 60, endedAt: at + 3_600_000 });
      };
      run('a', 'transcribe', at(1, '10:15:00'), 1);
      run('b', 'transcribe', at(1, '10:59:59'), 2);
      run('c', 'streams', at(1, '11:30:00'), 4);
      run('d', 'transcribe', at(2, '09:00:00'), 8);
      run('e', 'transcribe', at(3, '09:00:00'), 16); // outside [from, to)
      await u.ledger.flush();

      const hours = await get(u.api, `/v1/usage?tenant=clinic&${RANGE}&granularity=hour`);
      assert.deepEqual(hours.body, {
        tenant: 'clinic',
        from: iso(1, '00:00:00'),
        to: iso(3, '00:00:00'),
        granularity: 'hour',
        total: { credits: 15, sessions: 4, mediaSeconds: 240, ...NO_SPEECH },
        buckets: [
          { start: iso(1, '10:00:00'), credits: 3, sessions: 2, mediaSeconds: 120, ...NO_SPEECH },
          { start: iso(1, '11:00:00'), credits: 4, sessions: 1, mediaSeconds: 60, ...NO_SPEECH },
          { start: iso(2, '09:00:00'), credits: 8, sessions: 1, mediaSeconds: 60, ...NO_SPEECH },
        ],
      });
      const days = await get(u.api, `/v1/usage?tenant=clinic&${RANGE}&granularity=day&endpoint=transcribe`);
      assert.deepEqual(days.body.buckets, [
        { start: iso(1, '00:00:00'), credits: 3, sessions: 2, mediaSeconds: 120, ...NO_SPEECH },
        { start: iso(2, '00:00:00'), credits: 8, sessions: 1, mediaSeconds: 60, ...NO_SPEECH },
      ]);
      assert.deepEqual(days.body.total, { credits: 11, sessions: 3, mediaSeconds: 180, ...NO_SPEECH });
      await u.close();
    });

    // Redis only: an in-process store is one per process, and key expiry is Redis's.
    if (mode === 'redis')
      test('two replicas on one store add up', async () => {
        const prefix = uniquePrefix();
        const a = await make({}, prefix);
        const b = await make({}, prefix);
        for (const [u, k, credits] of [
          [a, 'ra', 1.1],
          [b, 'rb', 2.2],
          [a, 'rc', 3.3],
        ] as const) {
          u.ledger.sessionStarted({
            sessionKey: k,
            tenant: k === 'rb' ? 'beta' : 'acme',
            endpoint: 'transcribe',
            startedAt: T0,
          });
          u.ledger.recordUsage({ sessionKey: k, seq: 1, kind: 'final', credits, at: T0 });
          u.ledger.sessionEnded({ sessionKey: k, outcome: 'ended', mediaSeconds: 1, endedAt: T0 + 1 });
        }
        // b also records a's session's final again (a resumed session seen by two replicas).
        b.ledger.recordUsage({ sessionKey: 'ra', seq: 1, kind: 'final', credits: 1.1, at: T0 });
        await Promise.all([a.ledger.flush(), b.ledger.flush()]);
        const fromB = await get(b.api, `/v1/usage?tenant=acme&${RANGE}&granularity=day`);
        assert.deepEqual(fromB.body.total, { credits: 4.4, sessions: 2, mediaSeconds: 2, ...NO_SPEECH });
        assert.deepEqual((await get(a.api, '/v1/tenants')).body, { tenants: ['acme', 'beta'] });
        await Promise.all([a.close(), b.close()]);
      });

    if (mode === 'redis')
      test('bucket keys expire after the retention period', async () => {
        const prefix = uniquePrefix();
        const now = Date.now();
        const u = await make({ retentionDays: 7, now: () => now }, prefix);
        u.ledger.sessionStarted({ sessionKey: 'r1', tenant: 'acme', endpoint: 'transcribe', startedAt: now });
        u.ledger.recordUsage({ sessionKey: 'r1', seq: 1, kind: 'delta', credits: 1, at: now });
        await u.ledger.flush();
        const raw = new Redis(redis!.url);
        const keys = await raw.keys(`${prefix}{t:acme}:b:*`);
        assert.equal(keys.length, 2); // one hour and one day bucket
        for (const k of keys) {
          const ttl = await raw.pttl(k);
          assert.ok(ttl > 0 && ttl <= 7 * 86_400_000, `${k} ttl ${ttl}`);
        }
        const sessionTtl = await raw.pttl(`${prefix}s:r1`);
        assert.ok(sessionTtl > 0 && sessionTtl <= 7 * 86_400_000);
        raw.disconnect();
        await u.close();
      });

    test('data older than the retention period is not reported', async () => {
      let now = T0;
      const u = await make({ retentionDays: 2, now: () => now });
      u.ledger.sessionStarted({ sessionKey: 'old', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
      u.ledger.recordUsage({ sessionKey: 'old', seq: 1, kind: 'final', credits: 5, at: T0 });
      await u.ledger.flush();
      now = T0 + 3 * 86_400_000;
      // A late event (e.g. from a journal) for an expired session is applied against the past.
      u.ledger.sessionStarted({ sessionKey: 'new', tenant: 'acme', endpoint: 'transcribe', startedAt: now });
      await u.ledger.flush();
      const all = await get(u.api, '/v1/usage/sessions?tenant=acme');
      assert.deepEqual(
        all.body.sessions.map((s: { sessionKey: string }) => s.sessionKey),
        ['new'],
      );
      await u.close();
    });
  });
}
