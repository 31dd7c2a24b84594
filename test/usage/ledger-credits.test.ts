// speech_gateway_ledger_credits: the ledger's own cumulative credits per tenant, read from its store
// at scrape time, equal the usage API's totals (final figures replacing deltas, several segments,
// replays), in Redis and in process; tenants past METRICS_MAX_TENANTS are summed as 'other'; a
// Redis that cannot be read leaves the gauge out of the scrape and counts the failure, and the
// scrape itself still succeeds.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { registry, setMaxTenantLabels } from '../../src/telemetry/index.js';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { get, uniquePrefix, usageOptions } from '../support/usage.js';
import { startRedis, type TestRedis } from './redis.js';

const T0 = Date.now() - 60_000;
const RANGE = `from=${new Date(T0 - 86_400_000).toISOString()}&to=${new Date(T0 + 86_400_000).toISOString()}`;

/** The gauge's samples in the registry's text, by tenant label. */
async function gauge(): Promise<Map<string, number>> {
  const text = await registry.metrics();
  const lines = text.match(/^speech_gateway_ledger_credits\{tenant="[^"]*"\} \S+$/gm) ?? [];
  return new Map(lines.map((l) => [/tenant="([^"]*)"/.exec(l)![1], Number(l.split(' ').at(-1))]));
}

const failures = async () =>
  Number(/^speech_gateway_ledger_read_failures_total (\S+)$/m.exec(await registry.metrics())![1]);

/** Sessions of two tenants: deltas then a lower final, two segments, a replayed message. */
async function traffic(u: Usage): Promise<void> {
  const l = u.ledger;
  l.sessionStarted({ sessionKey: 'a1', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
  l.recordUsage({ sessionKey: 'a1', seq: 1, kind: 'delta', credits: 0.4, at: T0 + 1 });
  l.recordUsage({ sessionKey: 'a1', seq: 2, kind: 'final', credits: 0.3, at: T0 + 2 });
  l.recordUsage({ sessionKey: 'a1', seq: 3, seg: 1, kind: 'delta', credits: 0.125, at: T0 + 3 });
  l.recordUsage({ sessionKey: 'a1', seq: 3, seg: 1, kind: 'delta', credits: 0.125, at: T0 + 3 });
  l.sessionEnded({ sessionKey: 'a1', outcome: 'ended', mediaSeconds: 3, endedAt: T0 + 4 });
  l.sessionStarted({ sessionKey: 'b1', tenant: 'beta', endpoint: 'streams', startedAt: T0 + 10 });
  l.recordUsage({ sessionKey: 'b1', seq: 1, kind: 'final', credits: 1.75, at: T0 + 11 });
  l.sessionEnded({ sessionKey: 'b1', outcome: 'ended', mediaSeconds: 2, endedAt: T0 + 12 });
  await l.flush();
}

for (const mode of ['redis', 'in-process'] as const) {
  describe(`ledger credit totals at scrape time (${mode})`, () => {
    let redis: TestRedis | null = null;
    beforeAll(async () => {
      if (mode === 'redis') redis = await startRedis();
    });
    afterAll(async () => {
      setMaxTenantLabels(50);
      await redis?.stop();
    });

    test("equal the usage API's totals per tenant; past the tenant cap, summed as 'other'", async () => {
      const u = await createUsage(
        usageOptions({ redis: redis ? { url: redis.url } : undefined, keyPrefix: uniquePrefix() }),
      );
      await traffic(u);
      const api = async (tenant: string) =>
        (await get(u.api, `/v1/usage?tenant=${tenant}&${RANGE}&granularity=hour`)).body.total.credits as number;
      assert.deepEqual(
        await gauge(),
        new Map([
          ['acme', await api('acme')],
          ['beta', await api('beta')],
        ]),
      );
      assert.equal(await api('acme'), 0.425);
      setMaxTenantLabels(1);
      assert.deepEqual(
        await gauge(),
        new Map([
          ['acme', 0.425],
          ['other', 1.75],
        ]),
      );
      setMaxTenantLabels(50);
      await u.close();
      assert.deepEqual(await gauge(), new Map(), 'a closed ledger reports nothing');
    });

    test.runIf(mode === 'redis')(
      'Redis unreadable: the scrape succeeds without the gauge and counts the failure',
      async () => {
        const u = await createUsage(usageOptions({ redis: { url: redis!.url }, keyPrefix: uniquePrefix() }));
        await traffic(u);
        assert.equal((await gauge()).get('beta'), 1.75);
        const before = await failures();
        await redis!.stop();
        try {
          const text = await registry.metrics();
          assert.doesNotMatch(text, /^speech_gateway_ledger_credits\{/m, 'the gauge is left out');
          assert.match(text, /^speech_gateway_redis_up /m, 'the other metrics are scraped');
          // The counter is written before the gauge is read: the next scrape shows this one's failure.
          assert.ok((await failures()) >= before + 1, 'the failure is counted');
        } finally {
          await redis!.restart();
          await u.close();
        }
      },
    );
  });
}
