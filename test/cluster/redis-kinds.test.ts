// Sessions that outlive their replica, on each kind of Redis a large deployment runs, from real parts:
// Redis behind Sentinel (a primary, its replica, three sentinels) and a Redis Cluster (three primaries
// with a replica each, `redis-cli --cluster create`). Two gateway processes share it and one emulator.
// On each, first a Redis primary killed mid-session (its replica promoted), after which that session
// is still taken over when its gateway replica dies; then, on the promoted primary, a replica
// SIGKILLed mid-stream, its session taken over from its record and position, and a SIGTERM drain, the
// session handed over and resumed on the other replica. Each time: every final once, one ledger
// session, credits equal to the upstream's. And a tenant's cap of one session held across both
// replicas; and the record store's own rules, on each.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { Cluster as RedisCluster, Redis } from 'ioredis';
import { createRecordStore, recordKeyHash, type SealedRecord } from '../../src/cluster/index.js';
import { connectRedis, newRedis, type RedisSettings } from '../../src/redis/index.js';
import { replicaUrl, resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, refusal, type TestClient } from '../support/stack.js';
import { finals, type Final } from '../support/transcripts.js';
import { delay, until } from '../support/wait.js';
import { startCluster as startRedisCluster } from '../usage/redis-cluster.js';
import { PRIMARY_NAME, startSentinels } from '../usage/sentinel.js';

const API = 'redis-kinds-usage-token';
const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

/** A kind of Redis: the gateway's settings for it, and a primary failover. */
interface Topology {
  env: Record<string, string>;
  settings: RedisSettings;
  /** SIGKILLs a primary (on a cluster, the one holding the record of the session with resume key
   *  `key`) and resolves once its replica is promoted. */
  failover(key: string): Promise<void>;
  stop(): void;
}

const kinds: Record<string, () => Promise<Topology>> = {
  async sentinel() {
    const t = await startSentinels();
    return {
      env: { REDIS_SENTINELS: t.sentinels, REDIS_SENTINEL_NAME: PRIMARY_NAME },
      settings: { sentinels: sentinelAddresses(t.sentinels), name: PRIMARY_NAME },
      async failover() {
        t.killPrimary();
        await until(async () => (await t.primaryPortNow()) === t.replicaPort, 'the replica promoted', {
          withinMs: 30_000,
          everyMs: 200,
        });
      },
      stop: () => t.stop(),
    };
  },
  async cluster() {
    const c = await startRedisCluster();
    return {
      env: { REDIS_CLUSTER_NODES: c.clusterNodesEnv },
      settings: { clusterNodes: sentinelAddresses(c.clusterNodesEnv) },
      async failover(key) {
        const record = `sgw:rec:${recordKeyHash(key)}`;
        const primary = await c.primaryOf(record);
        c.kill(primary);
        await until(async () => (await c.primaryOf(record)) !== primary && (await c.ok()), 'its replica promoted', {
          withinMs: 30_000,
          everyMs: 200,
        });
      },
      stop: () => c.stop(),
    };
  },
};

const sentinelAddresses = (list: string) =>
  list.split(',').map((a) => ({ host: a.split(':')[0], port: Number(a.split(':')[1]) }));

/** Each final once, in order: one overlaps the one before by less than a 60 ms Opus packet at most
 *  (where a replay starts), none is repeated, and they reach the end of the audio. */
function assertOnce(f: Final[], label: string): void {
  assert.ok(f.length > 3, `${label}: finals arrived (${f.length})`);
  for (let i = 1; i < f.length; i++)
    assert.ok(f[i].start >= f[i - 1].end - 0.06 - 1e-6, `${label}: final ${i} (${f[i].start}-${f[i].end}) once`);
  assert.ok(f.at(-1)!.end > 8.5, `${label}: one timeline to the end of the audio (${f.at(-1)!.end})`);
}

/** One ledger session for `tenant`, of `segments` upstream sessions, with the credits they reported. */
async function assertLedger(cluster: Cluster, i: number, tenant: string, segments: number): Promise<void> {
  const read = async () => {
    const res = await fetch(`http://127.0.0.1:${cluster.replicas[i].adminPort}/v1/usage/sessions?tenant=${tenant}`, {
      headers: { authorization: `Bearer ${API}` },
    });
    return ((await res.json()) as { sessions: Array<{ credits: number; segments: unknown[]; end: unknown }> }).sessions;
  };
  let rows = await read();
  for (let t = 0; t < 50 && rows[0]?.end == null; t++) rows = await delay(100).then(read);
  assert.equal(rows.length, 1, 'one ledger session');
  assert.equal(rows[0].segments.length, segments, `${segments} upstream segments`);
  const reported = cluster.emulator.sessions
    .filter((s) => s.tenant === tenant)
    .map((s) => s.sent as Array<{ type: string; credits?: number }>)
    .reduce((n, sent) => n + (sent.find((m) => m.type === 'usage')?.credits ?? 0), 0);
  assert.ok(
    reported > 0 && Math.abs(rows[0].credits - reported) < 1e-6,
    `ledger ${rows[0].credits} = upstream ${reported}`,
  );
}

/** A resumable session on replica `i`: configured, `n` pieces sent at 3× real time. */
async function begin(cluster: Cluster, i: number, tenant: string, key: string, n: number): Promise<TestClient> {
  const c = await openClient(await replicaUrl(cluster, i, tenant, key));
  c.sendJson({ type: 'config', configuration });
  await c.next('CONFIG_ACCEPTED');
  for (const piece of pieces.slice(0, n)) {
    c.send(piece);
    await delay(100);
  }
  return c;
}

/** The client back on replica `i` with its key: resumed, the rest of its stream resent, ended. */
async function resumeAndEnd(cluster: Cluster, i: number, tenant: string, key: string): Promise<TestClient> {
  const c = await openClient(await replicaUrl(cluster, i, tenant, key));
  c.sendJson({ type: 'config', configuration });
  const accepted = await c.next('CONFIG_ACCEPTED', 35_000);
  assert.equal(accepted.resumed, true, 'resumed');
  await resendFrom(c, stream, accepted.audioBytes);
  c.sendJson({ type: 'end' });
  await c.next('ended', 30_000);
  return c;
}

const errors = (cs: TestClient[]) => cs.flatMap((c) => c.messages.filter((m) => m.type === 'error'));

describe.each(Object.keys(kinds))('on Redis %s', (kind) => {
  let topology: Topology;
  let cluster: Cluster;
  beforeAll(async () => {
    topology = await kinds[kind]();
    // A cap of one session a tenant (each case has a tenant of its own): the leases are in Redis too.
    cluster = await startCluster(2, { ...topology.env, USAGE_API_TOKEN: API, MAX_SESSIONS_PER_TENANT: '1' });
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
    topology?.stop();
  });

  it('a Redis primary killed mid-session: the session goes on, and is still taken over when its replica dies', async () => {
    const tenant = `${kind}-failover`;
    const key = newResumeKey();
    const first = await begin(cluster, 0, tenant, key, 8);
    await topology.failover(key);
    for (const piece of pieces.slice(8, 16)) {
      first.send(piece);
      await delay(100);
    }
    await first.next('transcript', 10_000);
    await delay(2500); // positions written on the promoted primary
    await cluster.kill(0);
    const second = await resumeAndEnd(cluster, 1, tenant, key);
    assert.deepEqual(errors([first, second]), []);
    assertOnce(finals([...first.messages, ...second.messages]), 'failover');
    await assertLedger(cluster, 1, tenant, 2);
  });
  it('a replica SIGKILLed mid-stream: the other takes the session over; finals once, credits exact', async () => {
    await cluster.allUp();
    const tenant = `${kind}-crash`;
    const key = newResumeKey();
    const first = await begin(cluster, 0, tenant, key, 14);
    await first.next('transcript', 10_000);
    await delay(1000);
    await cluster.kill(0);
    const second = await resumeAndEnd(cluster, 1, tenant, key);
    assert.deepEqual(errors([first, second]), []);
    assertOnce(finals([...first.messages, ...second.messages]), 'takeover');
    await assertLedger(cluster, 1, tenant, 2);
  });

  it('a SIGTERM drain: the session handed over and resumed on the other replica; finals once, credits exact', async () => {
    await cluster.allUp();
    const tenant = `${kind}-drain`;
    const key = newResumeKey();
    const first = await begin(cluster, 1, tenant, key, 14);
    await first.next('transcript', 10_000);
    const exit = cluster.stop(1);
    assert.equal((await first.closed).code, 1012, 'handed over');
    const second = await resumeAndEnd(cluster, 0, tenant, key);
    assert.equal(await exit, 0);
    assert.deepEqual(errors([first, second]), []);
    assertOnce(finals([...first.messages, ...second.messages]), 'handover');
    await assertLedger(cluster, 0, tenant, 2);
  });

  it('the tenant cap holds across the two replicas, and the slot is free again once the session ends', async () => {
    await cluster.allUp();
    const tenant = `${kind}-cap`;
    const first = await begin(cluster, 0, tenant, newResumeKey(), 2);
    const over = await refusal(await replicaUrl(cluster, 1, tenant, newResumeKey()));
    assert.equal(over.status, 429, 'the second session of the tenant, on the other replica');
    first.sendJson({ type: 'end' });
    await first.next('ended', 30_000);
    const next = await begin(cluster, 1, tenant, newResumeKey(), 1);
    next.sendJson({ type: 'end' });
    await next.next('ended', 30_000);
  });

  it('the record store: of two racing claims one wins, a handed-over record goes to one janitor once, positions read back', async () => {
    const client = newRedis({ Redis, Cluster: RedisCluster }, topology.settings);
    client.on('error', () => undefined);
    await connectRedis(client, 10_000);
    try {
      const store = createRecordStore({ redis: client, graceSeconds: 30 });
      const hashes = ['a', 'b', 'c'].map((k) => recordKeyHash(`${kind}-store-${k}`));
      const rec = (owner: string, state: SealedRecord['state']): SealedRecord => ({
        v: 2,
        owner,
        ownerUrl: `ws://${owner}`,
        state,
        tenant: 't',
        endpoint: 'transcribe',
        sessionKey: 'sk',
        sealed: 'c2VhbGVk',
        timeline: { kind: 'webm', offset: 0, finalUntil: 1, mediaReceived: 2, audioBytes: 10, segment: 0, seq: 1 },
        updatedAt: Date.now(),
      });
      for (const h of hashes) assert.equal(await store.put(h, rec('x', 'handed_over'), Date.now() - 1), true);
      const racing = await Promise.all(
        ['y', 'z'].map((o) => store.claim(hashes[0], { owner: 'x', state: 'handed_over' }, rec(o, 'live'))),
      );
      const winner = racing[0] ? 'y' : 'z';
      assert.deepEqual([...racing].sort(), [false, true], 'one claim wins');
      const reaped = await Promise.all([store.reap(Date.now()), store.reap(Date.now())]);
      assert.equal(reaped.flat().length, 2, 'the two unclaimed ones, each to one janitor');
      const now = await store.getMany(hashes);
      assert.deepEqual(
        now.map((r) => r?.owner),
        [winner, undefined, undefined],
      );
      assert.equal(await store.touch(hashes[0]), true);
      await store.writePositions('x', new Map([[hashes[0].slice(0, 16), '[1]']]), [], true);
      assert.equal(await store.position('x', hashes[0]), '[1]');
    } finally {
      client.disconnect();
    }
  });
});
