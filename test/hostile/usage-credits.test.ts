// An upstream that reports nonsense credits (-1000, 1e13, 1e300) through a real gateway: the
// figure reaches no tenant total, not speech_gateway_credits_total, and not the client. The
// client still gets its delta_usage after `flushed` (0: nothing was counted) and its final
// `usage` (the session's last good figure, which is what the ledger holds), the session's `end`
// is recorded and its usage is marked estimated; the refusal is counted.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { ledgerSessions } from '../support/usage-api.js';
import { metrics } from '../../src/telemetry/index.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const API_TOKEN = 'usage-credits-token';
const webm = chromeChunks('webm-opus');

const creditsCounted = async (tenant: string) =>
  (await metrics.credits.get()).values.filter((v) => v.labels.tenant === tenant).reduce((sum, v) => sum + v.value, 0);
const refusals = async () => (await metrics.usageRefused.get()).values.reduce((sum, v) => sum + v.value, 0);

for (const mode of ['in-process', 'redis'] as const) {
  describe(`an upstream reporting credits out of range (${mode} ledger)`, () => {
    let redis: TestRedis | undefined;
    let stack: Stack;
    beforeAll(async () => {
      redis = mode === 'redis' ? await startRedis() : undefined;
      stack = await startStack({ PACE: '20', USAGE_API_TOKEN: API_TOKEN, ...(redis ? { REDIS_URL: redis.url } : {}) });
    });
    afterAll(async () => {
      await stack?.close();
      await redis?.stop();
    });

    for (const bad of [-1000, 1e13, 1e300]) {
      it(`${bad}: counted nowhere, the client gets the last good figure, the end is recorded`, async () => {
        const tenant = `${mode === 'redis' ? 'r' : 'm'}${String(bad).replace(/[^0-9a-z]/g, '')}`;
        const refusedBefore = await refusals();
        stack.emulator.faults.usageCredits = null;
        const c = await stack.connect('transcribe', { token: await stack.token('openid transcribe', tenant), tenant });
        c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
        await c.next('CONFIG_ACCEPTED');
        for (const piece of webm.slice(0, 12)) c.send(piece);
        c.sendJson({ type: 'flush' });
        await c.next('flushed', 20_000);
        const good = (await c.next('delta_usage')).credits as number;
        assert.ok(good > 0, `a real figure first (${good})`);

        stack.emulator.faults.usageCredits = bad;
        for (const piece of webm.slice(12, 20)) c.send(piece);
        c.sendJson({ type: 'flush' });
        await c.next('flushed', 20_000);
        assert.equal((await c.next('delta_usage')).credits, 0, 'a refused delta adds nothing');
        c.sendJson({ type: 'end' });
        const final = (await c.next('usage', 20_000)).credits;
        await c.next('ended');
        await c.closed;
        stack.emulator.faults.usageCredits = null;
        assert.equal(final, good, 'the final usage is the last good figure');

        let row: Awaited<ReturnType<typeof ledgerSessions>>[number] | undefined;
        for (let i = 0; i < 100 && !row?.end; i++) {
          [row] = await ledgerSessions(stack, API_TOKEN, tenant);
          if (!row?.end) await delay(50);
        }
        assert.ok(row?.end, 'the session ended in the ledger');
        assert.deepEqual([row.credits, row.estimated, row.outcome], [good, true, 'ended']);
        const range = `from=${new Date(Date.now() - 86_400_000).toISOString()}&to=${new Date(Date.now() + 86_400_000).toISOString()}`;
        const res = await fetch(
          `http://127.0.0.1:${stack.gateway.server.adminPort}/v1/usage?tenant=${tenant}&${range}&granularity=day`,
          {
            headers: { authorization: `Bearer ${API_TOKEN}` },
          },
        );
        assert.equal(
          ((await res.json()) as { total: { credits: number } }).total.credits,
          good,
          '/v1/usage agrees with /v1/usage/sessions',
        );
        assert.equal(await creditsCounted(tenant), good, 'speech_gateway_credits_total');
        assert.equal(await refusals(), refusedBefore + 2, 'both refused figures counted');
      });
    }
  });
}
