// Upgrading a single Redis: a ledger written in the layout from before Cluster support (by those
// scripts, test/usage/legacy-lua.ts) stays visible through the usage API after the start-up migration,
// sessions it recorded go on being settled exactly, the migration runs once (its marker), and keys the
// old layout gets after it (an old replica still running) are merged by running it again.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, test } from 'vitest';
import { Redis } from 'ioredis';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { registryKeys } from '../../src/usage/keys.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { NO_SPEECH, get, uniquePrefix, usageOptions } from '../support/usage.js';
import * as legacy from './legacy-lua.js';
import { startRedis, type TestRedis } from './redis.js';

const DAY = 86_400_000;
const D = Math.floor(Date.now() / DAY) * DAY - DAY; // yesterday 00:00 UTC
const T = D + 10 * 3_600_000;
const RANGE = `from=${new Date(D).toISOString()}&to=${new Date(D + DAY).toISOString()}`;
const RETENTION = 30 * DAY;

let redis: TestRedis;
let old: Redis & Record<'oldStart' | 'oldUsage' | 'oldEnd', (...a: (string | number)[]) => Promise<unknown>>;
beforeAll(async () => {
  redis = await startRedis();
  old = new Redis(redis.url) as typeof old;
  old.defineCommand('oldStart', { numberOfKeys: 1, lua: legacy.START });
  old.defineCommand('oldUsage', { numberOfKeys: 1, lua: legacy.USAGE });
  old.defineCommand('oldEnd', { numberOfKeys: 1, lua: legacy.END });
});
afterAll(async () => {
  old.disconnect();
  await redis.stop();
});

/** A session as the previous version's ledger wrote it: start, deltas (or a final), maybe its end. */
async function oldSession(
  prefix: string,
  tenant: string,
  k: string,
  o: { deltas?: number[]; final?: number; mediaMs?: number; endpoint?: string },
) {
  const sk = `${prefix}s:${k}`;
  const base = [prefix, T, RETENTION];
  await old.oldStart(sk, ...base, k, tenant, o.endpoint ?? 'transcribe', T, '', '');
  let seq = 0;
  for (const micro of o.deltas ?? []) await old.oldUsage(sk, ...base, 0, ++seq, 'delta', micro);
  if (o.final !== undefined) await old.oldUsage(sk, ...base, 0, seq + 1, 'final', o.final);
  if (o.mediaMs !== undefined) await old.oldEnd(sk, ...base, 'ended', o.mediaMs, T + 1000);
}

async function total(u: Usage, tenant: string) {
  const res = await get(u.api, `/v1/usage?tenant=${encodeURIComponent(tenant)}&${RANGE}&granularity=hour`);
  assert.equal(res.status, 200);
  return res.body.total as { credits: number; sessions: number; mediaSeconds: number };
}

const make = (prefix: string) =>
  createUsage(usageOptions({ redis: { url: redis.url }, keyPrefix: prefix, now: () => T }));

test('the old layout is moved at start-up: totals, sessions, tenants and credit totals as they were', async () => {
  const prefix = uniquePrefix();
  await oldSession(prefix, 'acme', 'o1', { deltas: [100_000, 200_000], mediaMs: 3000 });
  await oldSession(prefix, 'acme', 'o2', { deltas: [500_000] }); // still running at the upgrade
  await oldSession(prefix, 'we:ird', 'o3', { final: 1_000_000, mediaMs: 1000, endpoint: 'streams' });
  await oldSession(prefix, 'beta', 'o4', { deltas: [7] });

  const u = await make(prefix);
  assert.deepEqual(await total(u, 'acme'), { credits: 0.8, sessions: 2, mediaSeconds: 3, ...NO_SPEECH });
  assert.deepEqual(await total(u, 'we:ird'), { credits: 1, sessions: 1, mediaSeconds: 1, ...NO_SPEECH });
  const sessions = await get(u.api, `/v1/usage/sessions?tenant=acme`);
  assert.deepEqual(
    sessions.body.sessions.map((s: { sessionKey: string; credits: number }) => [s.sessionKey, s.credits]),
    [
      ['o1', 0.3],
      ['o2', 0.5],
    ],
  );
  assert.deepEqual((await get(u.api, '/v1/tenants')).body.tenants, ['acme', 'beta', 'we:ird']);
  const client = createRedisClient({ url: redis.url });
  await client.connect();
  const store = new RedisUsageStore(client, prefix, RETENTION, () => T);
  assert.deepEqual(await store.creditTotals(), [
    { tenant: 'acme', micro: 800_000 },
    { tenant: 'we:ird', micro: 1_000_000 },
    { tenant: 'beta', micro: 7 },
  ]);
  const left = (await client.keys(`${prefix}*`)).filter(
    (k) => !k.startsWith(`${prefix}s:`) && !k.startsWith(`${prefix}{`),
  );
  assert.deepEqual(left, [], 'no key of the old layout is left');

  // The running session goes on under the new code: a final below its deltas, then its end.
  u.ledger.recordUsage({ sessionKey: 'o2', seq: 2, kind: 'final', credits: 0.3, at: T + 10 });
  u.ledger.sessionEnded({ sessionKey: 'o2', outcome: 'ended', mediaSeconds: 2, endedAt: T + 20 });
  u.ledger.sessionStarted({ sessionKey: 'n1', tenant: 'acme', endpoint: 'transcribe', startedAt: T });
  u.ledger.recordUsage({ sessionKey: 'n1', seq: 1, kind: 'delta', credits: 0.05, at: T + 10 });
  await u.ledger.flush();
  assert.deepEqual(await total(u, 'acme'), { credits: 0.65, sessions: 3, mediaSeconds: 5, ...NO_SPEECH });
  await u.close();

  // Once only: the marker is set, and a second start moves nothing.
  assert.equal(await client.get(registryKeys(prefix).schema), '2');
  const again = await make(prefix);
  assert.deepEqual(await total(again, 'acme'), { credits: 0.65, sessions: 3, mediaSeconds: 5, ...NO_SPEECH });
  await again.close();

  // An old replica still writing after the move: its keys are merged when the migration runs again.
  await oldSession(prefix, 'acme', 'o5', { deltas: [1_000_000], mediaMs: 500 });
  await client.del(registryKeys(prefix).schema);
  const merged = await make(prefix);
  assert.deepEqual(await total(merged, 'acme'), { credits: 1.65, sessions: 4, mediaSeconds: 5.5, ...NO_SPEECH });
  assert.deepEqual(await store.creditTotals(), [
    { tenant: 'acme', micro: 1_650_000 },
    { tenant: 'we:ird', micro: 1_000_000 },
    { tenant: 'beta', micro: 7 },
  ]);
  await merged.close();
  client.disconnect();
});
