// Concurrent-session caps per tenant: across replicas through Redis leases, and in process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { Redis } from 'ioredis';
import { createUsage } from '../../src/usage/index.js';
import { tempDir, uniquePrefix } from '../support/usage.js';
import { until } from '../support/wait.js';
import { startRedis, type TestRedis } from './redis.js';

describe('session limiter across replicas (redis)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const make = (prefix: string, max: number) =>
    createUsage({
      redis: { url: redis.url },
      keyPrefix: prefix,
      journalDir: tempDir(),
      retentionDays: 1,
      maxSessionsPerTenant: max,
    });

  test('the cap holds across two instances, per tenant, and release frees a slot', async () => {
    const prefix = uniquePrefix();
    const [a, b] = await Promise.all([make(prefix, 2), make(prefix, 2)]);
    assert.equal(await a.limiter.acquire('acme', 's1'), true);
    assert.equal(await b.limiter.acquire('acme', 's2'), true);
    assert.equal(await b.limiter.acquire('acme', 's3'), false);
    assert.equal(await a.limiter.acquire('acme', 's4'), false);
    assert.equal(await a.limiter.acquire('acme', 's1'), true, 'a session already holding a slot keeps it');
    assert.equal(await b.limiter.acquire('other', 's5'), true, 'another tenant has its own cap');
    await a.limiter.release('acme', 's1');
    assert.equal(await b.limiter.acquire('acme', 's3'), true);
    assert.equal(await a.limiter.acquire('acme', 's6'), false);
    await Promise.all([a.close(), b.close()]);
  });

  test('atCap answers from the leases of every replica and takes nothing', async () => {
    const prefix = uniquePrefix();
    const [a, b] = await Promise.all([make(prefix, 2), make(prefix, 2)]);
    assert.equal(await b.limiter.atCap('acme'), false);
    assert.equal(await a.limiter.acquire('acme', 'c1'), true);
    for (let i = 0; i < 5; i++) assert.equal(await b.limiter.atCap('acme'), false, 'asking takes no slot');
    assert.equal(await a.limiter.acquire('acme', 'c2'), true);
    assert.equal(await b.limiter.atCap('acme'), true, 'two leases on the other replica fill the cap');
    assert.equal(await b.limiter.atCap('other'), false);
    await a.limiter.release('acme', 'c1');
    assert.equal(await b.limiter.atCap('acme'), false);
    await Promise.all([a.close(), b.close()]);
  });

  test('closing an instance releases its slots', async () => {
    const prefix = uniquePrefix();
    const [a, b] = await Promise.all([make(prefix, 1), make(prefix, 1)]);
    assert.equal(await a.limiter.acquire('acme', 'x1'), true);
    assert.equal(await b.limiter.acquire('acme', 'x2'), false);
    await a.close();
    assert.equal(await b.limiter.acquire('acme', 'x2'), true);
    await b.close();
  });

  test('a replica that dies without releasing leaks its slot only until the lease expires', async () => {
    const prefix = uniquePrefix();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./lease-holder.ts', import.meta.url))],
      {
        env: { ...process.env, REDIS_URL: redis.url, PREFIX: prefix, JOURNAL_DIR: tempDir(), LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    assert.equal(line.toString().trim(), 'held');
    const b = await make(prefix, 1);
    try {
      assert.equal(await b.limiter.acquire('acme', 'mine'), false, 'the live replica holds the only slot');
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
      await until(() => b.limiter.acquire('acme', 'mine'), 'the dead replica lease to expire');
    } finally {
      child.kill('SIGKILL');
      await b.close();
    }
  });

  test('with Redis unreachable each replica caps its own sessions; they count across replicas once it is back', async () => {
    const prefix = uniquePrefix();
    const [u, other] = await Promise.all([make(prefix, 1), make(prefix, 1)]);
    await redis.stop();
    try {
      assert.equal(await u.limiter.acquire('acme', 'o1'), true);
      assert.equal(await u.limiter.acquire('acme', 'o2'), false);
      await u.limiter.release('acme', 'o1');
      assert.equal(await u.limiter.acquire('acme', 'o2'), true);
    } finally {
      await redis.restart();
    }
    const raw = new Redis(redis.url);
    await until(async () => (await raw.zcard(`${prefix}{t:acme}:limit`)) === 1, 'the local slot to become a lease');
    raw.disconnect();
    assert.equal(await other.limiter.acquire('acme', 'o3'), false);
    await Promise.all([u.close(), other.close()]);
  });
});

describe('session limiter (in process)', () => {
  test('caps per tenant; 0 means unlimited', async () => {
    const u = await createUsage({ journalDir: tempDir(), retentionDays: 1, maxSessionsPerTenant: 1 });
    assert.equal(await u.limiter.acquire('acme', 'a'), true);
    assert.equal(await u.limiter.acquire('acme', 'b'), false);
    assert.equal(await u.limiter.acquire('beta', 'c'), true);
    assert.equal(await u.limiter.atCap('acme'), true);
    assert.equal(await u.limiter.atCap('beta'), true);
    await u.limiter.release('acme', 'a');
    assert.equal(await u.limiter.atCap('acme'), false, 'a released slot is free again');
    assert.equal(await u.limiter.acquire('acme', 'b'), true);
    await u.close();
    const free = await createUsage({ journalDir: tempDir(), retentionDays: 1, maxSessionsPerTenant: 0 });
    for (let i = 0; i < 50; i++) assert.equal(await free.limiter.acquire('acme', `s${i}`), true);
    assert.equal(await free.limiter.atCap('acme'), false);
    await free.close();
  });
});
