// The limiter renews leases per tenant, not per session: one script call (one ZADD) re-adds all of a
// replica's leases of a tenant, at most RENEW_BATCH at a time. Counted on a real redis-server by its
// INFO commandstats.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, test } from 'vitest';
import { tenantKeys } from '../../src/usage/keys.js';
import { RENEW_BATCH, RedisLimiter } from '../../src/usage/limiter.js';
import { createRedisClient, type ScriptedRedis } from '../../src/usage/redis-store.js';
import { uniquePrefix } from '../support/usage.js';
import { delay, until } from '../support/wait.js';
import { startRedis, type TestRedis } from './redis.js';

let redis: TestRedis;
let client: ScriptedRedis;
beforeAll(async () => {
  redis = await startRedis();
  client = createRedisClient({ url: redis.url });
  await client.connect();
});
afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

/** calls of `command` since the last CONFIG RESETSTAT (commands inside scripts count too). */
async function calls(command: string): Promise<number> {
  const stats = await client.info('commandstats');
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

test('one renewal call per tenant, not per session; a tenant with more than a batch takes a few', async () => {
  const prefix = uniquePrefix();
  // The timer never fires in this test: renewals run when the test asks.
  const limiter = new RedisLimiter(client, prefix, 10_000, { ttlMs: 30_000, renewMs: 3_600_000 });
  const renew = () => (limiter as unknown as { renew(): void }).renew();
  for (let i = 0; i < 50; i++) assert.equal(await limiter.acquire(i % 2 ? 'acme' : 'beta', `s${i}`), true);
  renew(); // loads the script
  await until(async () => (await calls('zadd')) > 50, 'the first renewal');
  const leases = tenantKeys(prefix, 'acme').leases;
  const before = Number(await client.zscore(leases, 's1'));
  await client.config('RESETSTAT');
  await delay(5); // the server clock moves on: renewed leases score higher
  renew();
  await until(async () => (await calls('evalsha')) >= 2, 'the renewal');
  await delay(100); // any further call would have landed by now
  assert.equal(await calls('evalsha'), 2, 'one script call per tenant');
  assert.equal(await calls('zadd'), 2, 'one ZADD per tenant');
  assert.ok(Number(await client.zscore(leases, 's1')) > before, 'the lease was renewed');
  assert.equal(await client.zcard(leases), 25);

  for (let i = 0; i < RENEW_BATCH * 2 + 100; i++) await limiter.acquire('big', `b${i}`);
  await client.config('RESETSTAT');
  renew();
  await until(async () => (await calls('evalsha')) >= 5, 'the renewal');
  await delay(100);
  assert.equal(await calls('evalsha'), 2 + 3, 'acme, beta, and three batches of big');
  await limiter.close();
  assert.equal(await client.exists(leases), 0, 'closing released the leases');
});
