// The usage ledger, the session limiter and the audit store on a real Redis Cluster (three primaries,
// a replica each): totals exact to the micro-credit over tenants and sessions spread across slots,
// replays changing nothing, the cap held across two replicas, audit pages, and a primary killed while
// events flow (its replica promoted; the journal covers the gap; the totals stay exact).
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { RedisAuditStore } from '../../src/audit/redis-store.js';
import type { AuditEvent } from '../../src/audit/index.js';
import type { RedisSettings } from '../../src/redis/index.js';
import { createUsage, type Usage } from '../../src/usage/index.js';
import { tenantKeys } from '../../src/usage/keys.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { get, uniquePrefix, usageOptions } from '../support/usage.js';
import { delay, until } from '../support/wait.js';
import { startCluster, type TestCluster } from './redis-cluster.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const D = Math.floor(Date.now() / DAY) * DAY - 2 * DAY; // two days ago, 00:00 UTC
const RANGE = `from=${new Date(D).toISOString()}&to=${new Date(D + 3 * DAY).toISOString()}`;
const TENANTS = ['acme', 'beta', 'gamma', 'delta'];

let cluster: TestCluster;
let settings: RedisSettings;
beforeAll(async () => {
  cluster = await startCluster();
  settings = { clusterNodes: cluster.clusterNodesEnv.split(',').map(hostPort) };
}, 60_000);
afterAll(() => cluster?.stop());

function hostPort(s: string): { host: string; port: number } {
  const [host, port] = s.split(':');
  return { host, port: Number(port) };
}

/** What a tenant should show: micro-credits, sessions and media by hour, and each session's micro. */
interface Expected {
  hours: Map<number, { micro: number; sessions: number; mediaMs: number }>;
  sessions: Map<string, number>;
}
const expected = (tenants = TENANTS) =>
  new Map(tenants.map((t) => [t, { hours: new Map(), sessions: new Map() } as Expected]));

/** One session's events through the ledger: start, deltas, maybe a final, end; adds it to `want`. */
function session(u: Usage, want: Map<string, Expected>, tenant: string, k: string, i: number, ended = true): void {
  const startedAt = D + (i % 40) * HOUR + i * 7;
  u.ledger.sessionStarted({ sessionKey: k, tenant, endpoint: i % 2 ? 'streams' : 'transcribe', startedAt });
  u.ledger.setUpstreamSessionId(k, `up-${k}`);
  let micro = 0;
  for (let seq = 1; seq <= 3; seq++) {
    u.ledger.recordUsage({ sessionKey: k, seq, kind: 'delta', credits: 0.000_123 * seq, at: startedAt });
    micro += 123 * seq;
  }
  if (i % 3 === 0) {
    u.ledger.recordUsage({ sessionKey: k, seq: 4, kind: 'final', credits: 0.5 + i / 1e6, at: startedAt });
    micro = 500_000 + i;
  }
  if (ended) u.ledger.sessionEnded({ sessionKey: k, outcome: 'ended', mediaSeconds: 1.5, endedAt: startedAt + 1 });
  const w = want.get(tenant)!;
  const h = startedAt - (startedAt % HOUR);
  const row = w.hours.get(h) ?? { micro: 0, sessions: 0, mediaMs: 0 };
  w.hours.set(h, { micro: row.micro + micro, sessions: row.sessions + 1, mediaMs: row.mediaMs + (ended ? 1500 : 0) });
  w.sessions.set(k, micro);
}

/** The usage API's hour buckets and sessions equal what was sent, exactly. */
async function assertExact(u: Usage, want: Map<string, Expected>): Promise<void> {
  for (const [tenant, w] of want) {
    const usage = await get(u.api, `/v1/usage?tenant=${tenant}&${RANGE}&granularity=hour`);
    assert.equal(usage.status, 200);
    const got = usage.body.buckets.map(
      (b: { start: string; credits: number; sessions: number; mediaSeconds: number }) => [
        Date.parse(b.start),
        Math.round(b.credits * 1e6),
        b.sessions,
        Math.round(b.mediaSeconds * 1000),
      ],
    );
    const wanted = [...w.hours].sort(([a], [b]) => a - b).map(([start, r]) => [start, r.micro, r.sessions, r.mediaMs]);
    assert.deepEqual(got, wanted, `${tenant}: hour buckets`);
    const seen = new Map<string, number>();
    let cursor: string | null = null;
    do {
      const page = await get(u.api, `/v1/usage/sessions?tenant=${tenant}${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(page.status, 200);
      for (const s of page.body.sessions) seen.set(s.sessionKey, Math.round(s.credits * 1e6));
      cursor = page.body.next;
    } while (cursor);
    assert.deepEqual(new Map([...seen].sort()), new Map([...w.sessions].sort()), `${tenant}: sessions`);
  }
}

describe('usage ledger on a Redis Cluster', () => {
  test('the tenants lie in different slots on different primaries', async () => {
    const primaries = new Set(await Promise.all(TENANTS.map((t) => cluster.primaryOf(tenantKeys('p:', t).credits))));
    assert.ok(primaries.size >= 2, `tenants on ${primaries.size} primaries`);
  });

  test('many sessions of several tenants: buckets and sessions exact to the micro-credit; replays change nothing', async () => {
    const prefix = uniquePrefix();
    const u = await createUsage(usageOptions({ redis: settings, keyPrefix: prefix }));
    const want = expected();
    const send = () => {
      for (let i = 0; i < 160; i++) session(u, want, TENANTS[i % TENANTS.length], `s${i}`, i);
    };
    send();
    await u.ledger.flush();
    assert.equal(u.ledger.journalDepth, 0);
    await assertExact(u, want);
    // Every event again (the ledger's replay after an outage sends them so): nothing changes.
    const again = expected();
    for (let i = 0; i < 160; i++) session(u, again, TENANTS[i % TENANTS.length], `s${i}`, i);
    await u.ledger.flush();
    await assertExact(u, want);
    const tenants = await get(u.api, '/v1/tenants');
    assert.deepEqual(tenants.body.tenants, [...TENANTS].sort());
    // The ledger's own credit totals, read across the tenants' slots.
    const client = createRedisClient(settings);
    await client.connect();
    const totals = await new RedisUsageStore(client, prefix, 30 * DAY, Date.now).creditTotals();
    const sum = (t: string) => [...want.get(t)!.sessions.values()].reduce((a, b) => a + b, 0);
    assert.deepEqual(
      totals,
      TENANTS.map((tenant) => ({ tenant, micro: sum(tenant) })),
    );
    client.disconnect();
    await u.close();
  });

  test('the session cap holds across two replicas, per tenant', async () => {
    const prefix = uniquePrefix();
    const make = () => createUsage(usageOptions({ redis: settings, keyPrefix: prefix, maxSessionsPerTenant: 2 }));
    const [a, b] = await Promise.all([make(), make()]);
    assert.equal(await a.limiter.acquire('acme', 'l1'), true);
    assert.equal(await b.limiter.acquire('acme', 'l2'), true);
    assert.equal(await b.limiter.acquire('acme', 'l3'), false);
    assert.equal(await a.limiter.atCap('acme'), true);
    assert.equal(await b.limiter.acquire('beta', 'l4'), true, 'another tenant, another slot, its own cap');
    await a.limiter.release('acme', 'l1');
    assert.equal(await b.limiter.acquire('acme', 'l3'), true);
    await Promise.all([a.close(), b.close()]);
  });
});

const MIB = 1024 * 1024;

describe('audit store on a Redis Cluster', () => {
  test('events of tenants in different slots are written and read a page at a time', async () => {
    const now = Date.now();
    const store = new RedisAuditStore(
      settings,
      `${uniquePrefix()}audit:`,
      30 * DAY,
      { tenantBytes: MIB, totalBytes: 16 * MIB },
      () => now,
    );
    await store.connect(5000);
    const event = (tenant: string, i: number) =>
      ({ event: 'session_opened', outcome: 'ok', tenant, sessionId: `${tenant}-${i}` }) as unknown as AuditEvent;
    for (const tenant of TENANTS)
      for (let i = 0; i < 5; i++) await store.add(tenant, event(tenant, i), now - 1000 + i, true);
    for (const tenant of TENANTS) {
      const ids: string[] = [];
      let after = null;
      for (;;) {
        const page = await store.range({ tenant, from: now - 10_000, to: now + 1, limit: 2, after });
        ids.push(...page.events.map((e) => (e as { sessionId: string }).sessionId));
        if (!page.next) break;
        after = page.next;
      }
      assert.deepEqual(
        ids,
        [0, 1, 2, 3, 4].map((i) => `${tenant}-${i}`),
      );
    }
    await store.close();
  });
});

describe('a slot moved without the client being told', () => {
  // The client sends a tick's commands to each node in one pipeline; where some of them meet MOVED and
  // others succeed, ioredis hands the MOVED replies to the callers and does not learn the new owner.
  test('the events that meet MOVED wait in the journal, then land exactly once the client learns the owner', async () => {
    const prefix = uniquePrefix();
    const moved = `moved-${prefix.replace(/\W/g, '')}`; // a tag no other test wrote: its slot holds no key
    const tenants = [moved, ...TENANTS];
    const u = await createUsage(usageOptions({ redis: settings, keyPrefix: prefix }));
    const want = expected(tenants);
    await cluster.moveSlot(tenantKeys(prefix, moved).credits);
    for (let i = 0; i < 60; i++) session(u, want, tenants[i % tenants.length], `m${i}`, i);
    await u.ledger.flush();
    await until(() => u.ledger.journalDepth === 0 && u.ledger.redisHealthy, 'the journal replayed', {
      withinMs: 20_000,
    });
    await u.ledger.flush();
    await assertExact(u, want);
    await u.close();
  });
});

describe('a primary killed while events flow', () => {
  test('its replica is promoted, the journal covers the gap, and the totals are exact', async () => {
    const prefix = uniquePrefix();
    const u = await createUsage(usageOptions({ redis: settings, keyPrefix: prefix }));
    const want = expected();
    const victim = await cluster.primaryOf(tenantKeys(prefix, 'acme').credits);
    let i = 0;
    const burst = () => {
      for (let j = 0; j < 8; j++, i++) session(u, want, TENANTS[i % TENANTS.length], `f${i}`, i);
    };
    for (let n = 0; n < 10; n++) {
      burst();
      await delay(20);
    }
    await u.ledger.flush();
    // Replication is asynchronous: a write the primary acknowledged a moment before dying may never
    // reach its replica (Redis Cluster's own limit, which no journal can see). Let it catch up first.
    await delay(200);
    cluster.kill(victim);
    const killedAt = Date.now();
    let promotedAfter = 0;
    let journaled = 0;
    // Events go on flowing through the failover, 8 sessions every 50 ms.
    while (Date.now() - killedAt < 15_000) {
      burst();
      await delay(50);
      journaled = Math.max(journaled, u.ledger.journalDepth);
      if (
        !promotedAfter &&
        (await cluster.primaryOf(tenantKeys(prefix, 'acme').credits).catch(() => victim)) !== victim
      )
        promotedAfter = Date.now() - killedAt;
      if (promotedAfter && Date.now() - killedAt > promotedAfter + 2000) break;
    }
    assert.ok(promotedAfter > 0, 'the replica was promoted');
    assert.ok(journaled > 0, 'events went to the journal during the failover');
    console.log(
      `replica promoted ${promotedAfter} ms after the kill; journal up to ${journaled} events; ${i} sessions`,
    );
    await until(() => u.ledger.journalDepth === 0 && u.ledger.redisHealthy, 'the journal replayed', {
      withinMs: 60_000,
    });
    await u.ledger.flush();
    await assertExact(u, want);
    await u.close();
  }, 120_000);
});
