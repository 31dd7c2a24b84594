// Whose trail an event lands in, and how big a trail grows, with the store in Redis. A usage API
// token scoped to one tenant adds nothing to another's trail (a forbidden call is kept under the
// caller's own tenants), a made-up tenant name makes no trail, repeats are one event with a count,
// and the store is bounded in bytes per tenant and in all.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAudit, type AuditTrail } from '../../src/audit/index.js';
import { logger } from '../../src/telemetry/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { until } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

type Event = Record<string, any>;
const ALL = 'tenant-trails-all-tenants-token';
const SCOPED = 'tenant-trails-token-of-other';
const KIB = 1024;
const range = () => ({
  from: new Date(Date.now() - 3_600_000).toISOString(),
  to: new Date(Date.now() + 3_600_000).toISOString(),
});

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(() => redis?.stop());

/** Every member of the sorted sets under `prefix`, by key, as a Redis reader sees them. */
async function trailsIn(prefix: string): Promise<Map<string, string[]>> {
  const client = new Redis(redis.url);
  try {
    const keys = (await client.keys(`${prefix}*`)).filter((k) => !k.endsWith(':bytes') && !k.endsWith('.trails'));
    const out = new Map<string, string[]>();
    for (const k of keys) if ((await client.type(k)) === 'zset') out.set(k, await client.zrange(k, 0, -1));
    return out;
  } finally {
    await client.quit();
  }
}

const standsFor = (events: Event[]): number => events.reduce((n, e) => n + (e.count ?? 1), 0);

describe('usage API calls in the trails of a gateway with Redis', () => {
  let stack: Stack;
  const prefix = 'sg:audit:';
  const api = (path: string, token: string) =>
    fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
  const trail = async (tenant: string): Promise<Event[]> => {
    const res = await api(`/v1/audit?${new URLSearchParams({ tenant, ...range(), limit: '1000' })}`, ALL);
    assert.equal(res.status, 200);
    return ((await res.json()) as { events: Event[] }).events;
  };

  beforeAll(async () => {
    stack = await startStack({
      REDIS_URL: redis.url,
      USAGE_API_TOKEN: ALL,
      USAGE_API_TOKENS: JSON.stringify({ dash: { token: SCOPED, tenants: ['other'] } }),
      AUDIT_COALESCE_SECONDS: '2',
    });
    const c = await stack.connect('transcribe'); // base's genuine events
    c.ws.close();
    await until(async () => (await trail('base')).some((e) => e.event === 'session_ended'), "base's session");
  });
  afterAll(() => stack?.close());

  it("a token scoped to one tenant, asking for another 300 times: nothing in the other's trail, one event with a count in its own", async () => {
    const before = (await trail('base')).filter((e) => e.event !== 'usage_api_call');
    for (let i = 0; i < 300; i += 50)
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          const res = await api(`/v1/usage/sessions?tenant=base`, SCOPED);
          assert.equal(res.status, 403);
        }),
      );
    const own = async () => (await trail('other')).filter((e) => e.caller === 'dash');
    await until(async () => standsFor(await own()) === 300, "all 300 calls in the caller's own trail");
    assert.ok((await own()).length <= 5, `${(await own()).length} events for 300 calls`);
    assert.ok((await own()).every((e) => e.tenant === 'other' && e.asked === 'base' && e.status === 403));
    const after = await trail('base');
    assert.equal(after.filter((e) => e.caller === 'dash').length, 0, "the scoped token is nowhere in base's trail");
    assert.deepEqual(
      after.filter((e) => e.event !== 'usage_api_call'),
      before,
    );
    const file = readFileSync(stack.gateway.config.AUDIT_LOG_FILE!, 'utf8');
    assert.ok(file.split('\n').filter((l) => l.includes('"caller":"dash"')).length <= 5, 'and a few lines in the log');
  });

  it('made-up tenant names make no trail, whoever asks', async () => {
    const marked = new Date().toISOString();
    for (let i = 0; i < 50; i++) {
      await api(`/v1/usage/sessions?tenant=made-up-${i}`, ALL);
      await api(`/v1/audit?${new URLSearchParams({ tenant: `made-up-audit-${i}`, ...range() })}`, ALL);
    }
    // Writes reach Redis in order: once a call for base is in its trail, the ones before it were written too.
    await api(`/v1/usage/sessions?tenant=base&marker=1`, SCOPED);
    await until(async () => (await trail('other')).some((e) => e.time >= marked), 'the last call written');
    const keys = [...(await trailsIn(prefix)).keys()];
    assert.deepEqual(
      keys.filter((k) => k.includes('made-up')),
      [],
    );
    assert.ok(keys.includes(`${prefix}base`), 'the known tenant has its trail');
  });
});

describe('the audit store in Redis, bounded in bytes', () => {
  const trails: AuditTrail[] = [];
  type Limits = { maxBytes?: number; tenantMaxBytes?: number };
  const openAt = async (url: string, keyPrefix: string, o: Limits) => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-bytes-')), 'audit.jsonl');
    const audit = await createAudit({
      file,
      redis: { url },
      keyPrefix,
      retentionDays: 1,
      trustedProxies: 0,
      logger,
      ...o,
    });
    return { audit, keyPrefix };
  };
  const open = async (o: Limits) => {
    const opened = await openAt(redis.url, `sg:audit:${randomBytes(4).toString('hex')}:`, o);
    trails.push(opened.audit);
    return opened;
  };
  afterAll(async () => {
    for (const t of trails) await t.close();
  });
  const opened = (tenant: string, i: number) => ({
    event: 'session_opened' as const,
    outcome: 'ok',
    tenant,
    subject: `user-${i % 7}`,
    sessionId: `${tenant}-${i}-${'s'.repeat(60)}`,
  });
  /** The bytes a trail holds: its members, and 64 each for Redis's bookkeeping. */
  const bytesOf = (members: string[]) => members.reduce((n, m) => n + Buffer.byteLength(m) + 64, 0);

  it("a tenant's trail stays within AUDIT_STORE_TENANT_MAX_BYTES, its newest kept", async () => {
    const { audit, keyPrefix } = await open({ tenantMaxBytes: 64 * KIB });
    for (let i = 0; i < 2000; i++) audit.record(opened('t1', i));
    await audit.flush();
    const members = (await trailsIn(keyPrefix)).get(`${keyPrefix}t1`)!;
    assert.ok(bytesOf(members) <= 64 * KIB, `${bytesOf(members)} bytes kept`);
    assert.ok(members.length > 100, `${members.length} events kept`);
    assert.ok(members.at(-1)!.includes('t1-1999-'), 'the newest is kept');
  });

  it('all trails together stay within AUDIT_STORE_MAX_BYTES, each its share', async () => {
    const { audit, keyPrefix } = await open({ maxBytes: 1024 * KIB, tenantMaxBytes: 1024 * KIB });
    for (let i = 0; i < 4000; i++) audit.record(opened('first', i)); // alone: the whole store
    await audit.flush();
    for (let i = 0; i < 4000; i++) for (const t of ['second', 'third', 'fourth']) audit.record(opened(t, i));
    await audit.flush();
    await until(async () => {
      const all = [...(await trailsIn(keyPrefix)).values()];
      return all.reduce((n, m) => n + bytesOf(m), 0) <= 1024 * KIB;
    }, 'the first trail trimmed to its share');
    const sets = await trailsIn(keyPrefix);
    for (const [k, m] of sets) assert.ok(bytesOf(m) <= 256 * KIB, `${k}: ${bytesOf(m)} bytes`);
    assert.equal(sets.size, 4);
  });

  /** 3,000 events of tenant `old` under `keyPrefix` as a release before byte bounds wrote them. */
  async function writeOldTrail(url: string, keyPrefix: string): Promise<void> {
    const client = new Redis(url);
    const now = Date.now();
    for (let batch = 0; batch < 3; batch++) {
      const args: Array<string | number> = [];
      for (let i = 0; i < 1000; i++) {
        const e = {
          time: new Date(now).toISOString(),
          event: 'session_opened',
          outcome: 'ok',
          tenant: 'old',
          sessionId: `old-${batch}-${i}`,
        };
        args.push((now - 10_000 + batch * 1000 + i) * 1000, `${randomBytes(4).toString('hex')} ${JSON.stringify(e)}`);
      }
      await client.zadd(`${keyPrefix}old`, ...args);
    }
    await client.quit();
  }

  /** Waits until `old`'s trail is within 64 KiB, its newest kept. */
  async function trimmedOld(url: string, keyPrefix: string): Promise<void> {
    const old = async () => {
      const client = new Redis(url);
      try {
        return await client.zrange(`${keyPrefix}old`, 0, -1);
      } finally {
        await client.quit();
      }
    };
    await until(async () => bytesOf(await old()) <= 64 * KIB, 'the old trail within its bytes');
    const left = await old();
    assert.ok(left.length > 100 && left.at(-1)!.includes('old-2-999'), `${left.length} of the newest kept`);
  }

  it('a trail written before byte bounds (up to 5,000,000 events) is trimmed to them at start', async () => {
    const keyPrefix = `sg:audit:${randomBytes(4).toString('hex')}:`;
    await writeOldTrail(redis.url, keyPrefix);
    const { audit } = await openAt(redis.url, keyPrefix, { tenantMaxBytes: 64 * KIB });
    trails.push(audit);
    await trimmedOld(redis.url, keyPrefix);
  });

  it('... and once Redis is back, when it was away at start', async () => {
    const own = await startRedis({ persist: true });
    const keyPrefix = `sg:audit:${randomBytes(4).toString('hex')}:`;
    await writeOldTrail(own.url, keyPrefix);
    await own.stop();
    const { audit } = await openAt(own.url, keyPrefix, { tenantMaxBytes: 64 * KIB });
    try {
      await own.restart();
      const client = new Redis(own.url);
      await until(async () => {
        audit.record(opened('new', Date.now()));
        await audit.flush();
        return (await client.exists(`${keyPrefix}new`)) === 1;
      }, 'a write once Redis is back');
      await client.quit();
      await trimmedOld(own.url, keyPrefix);
    } finally {
      await audit.close();
      await own.stop();
    }
  });

  it('20,000 identical refusals of one tenant are one event with a count: its genuine events stay', async () => {
    const { audit, keyPrefix } = await open({});
    for (let i = 0; i < 12; i++) audit.record(opened('t', i));
    const refused = {
      event: 'upgrade_refused' as const,
      outcome: 'refused',
      reason: 'tenant_limit',
      tenant: 't',
      subject: 'x',
      address: '192.0.2.1',
    };
    for (let i = 0; i < 20_000; i++) audit.record(refused);
    await audit.flush();
    const members = (await trailsIn(keyPrefix)).get(`${keyPrefix}t`)!;
    assert.ok(members.length <= 13, `${members.length} events kept`);
    assert.equal(members.filter((m) => m.includes('session_opened')).length, 12);
  });
});
