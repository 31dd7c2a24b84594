// The internal hop between replicas: two real gateway processes, one redis-server, the emulator. A resume
// that lands on the replica that does not hold its session is carried to the one that does (every
// final once, one ledger session, one tenant slot); the internal route refuses anything without a
// fresh signature of the replicas' secret and does not exist without one; closes pass through.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { recordKeyHash, signHop, type HopIdentity } from '../../src/cluster/index.js';
import { droppedSession, replicaUrl, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { metric } from '../support/metrics.js';
import { englishConfiguration, openClient, openConfigured, refusal } from '../support/stack.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const SECRET = randomBytes(32).toString('hex');
const API = 'hop-usage-token';
const chunks = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk
/** A takeover's replay starts at the Opus packet holding the last final's end: its next final may
 *  overlap that one by less than a packet (Chromium's are 60 ms). */
const PACKET = 0.06;
const whole = Buffer.concat(chunks);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const newKey = () => randomBytes(18).toString('base64url');

/** A session on replica 0 that had a final and dropped (droppedSession). */
const dropped = (cluster: Cluster, key: string, tenant: string, n: number) =>
  droppedSession(cluster, 0, key, tenant, chunks.slice(0, n), configuration);

function assertOneTimeline(all: Array<{ start: number; end: number }>, until: number): void {
  for (let k = 1; k < all.length; k++)
    assert.ok(
      Math.abs(all[k].start - all[k - 1].end) < 1e-6,
      `final ${k} follows final ${k - 1} (${all[k - 1].end} → ${all[k].start})`,
    );
  assert.ok(
    all.length > 0 && all[0].start < 1e-6 && all.at(-1)!.end > until,
    `the finals cover 0-${until} s: ${JSON.stringify(all)}`,
  );
}

const hopPath = '/internal/hop/audio-bridge/v2/transcribe';

describe('the internal hop between two replicas', () => {
  let cluster: Cluster;
  // Replica 0's admin port (the hop) is reached by the other one through a proxy: a test can slow the path back from it.
  let toReplica0: TcpProxy;
  beforeAll(async () => {
    toReplica0 = await startTcpProxy(() => cluster.replicas[0].adminPort);
    const env = {
      CLUSTER_SECRET: SECRET,
      PACE: '4',
      USAGE_API_TOKEN: API,
      RESUME_GRACE_SECONDS: '10',
      MAX_SESSIONS_PER_TENANT: '1',
    };
    cluster = await startCluster(2, env, (i): Record<string, string> =>
      i === 0 ? { ADVERTISE_URL: `ws://127.0.0.1:${toReplica0.port}` } : {},
    );
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
    await toReplica0?.close();
  });

  it('carries a resume that lands on the other replica to the session: every final once, one ledger session, one tenant slot', async () => {
    const key = newKey();
    const tenant = 'hop-carried';
    const { first, sessionId } = await dropped(cluster, key, tenant, 16);

    // Tenant cap 1: the hop takes no slot of its own (it would be refused), and the session keeps its one.
    const { client: second, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    assert.equal(accepted.resumed, true);
    assert.equal(accepted.sessionId, sessionId, 'the session on replica 0');
    const other = await refusal(await replicaUrl(cluster, 1, tenant, newKey()));
    assert.equal(other.body.error.id, 'TENANT_SESSION_LIMIT', "the session still holds the tenant's one slot");

    for (let off = accepted.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    assert.equal((await second.closed).code, 1000, "the owner's close, passed on");
    assertOneTimeline(finals([...first.messages, ...second.messages]), 7);
    assert.equal(second.types().filter((t) => t === 'usage').length, 1);

    const res = await fetch(`http://127.0.0.1:${cluster.replicas[1].adminPort}/v1/usage/sessions?tenant=${tenant}`, {
      headers: { authorization: `Bearer ${API}` },
    });
    const rows = ((await res.json()) as { sessions: Array<{ outcome: string | null }> }).sessions;
    assert.deepEqual(
      rows.map((r) => r.outcome),
      ['ended'],
      'one ledger session',
    );
    assert.equal(await metric(cluster.replicas[1].adminPort, 'speech_gateway_hops_total{result="opened"}'), 1);
    assert.equal(await metric(cluster.replicas[1].adminPort, 'speech_gateway_hop_sessions'), 0);
  });

  it('the internal route refuses a missing, forged, stale or mismatched signature, and nothing reaches the session', async () => {
    const key = newKey();
    const tenant = 'hop-forged';
    const { client } = await openConfigured(await replicaUrl(cluster, 0, tenant, key), configuration);
    const identity: HopIdentity = {
      tenant,
      subject: await subjectOf(cluster, tenant),
      endpoint: 'transcribe',
      notices: false,
      owner: cluster.replicas[0].id,
      ownerUrl: `ws://127.0.0.1:${toReplica0.port}`, // replica 0's ADVERTISE_URL
      from: cluster.replicas[1].id,
    };
    const url = `ws://127.0.0.1:${cluster.replicas[0].adminPort}${hopPath}?session=${recordKeyHash(key)}`;
    const attempts: Array<[string, Record<string, string>]> = [
      ['missing', {}],
      ['forged', signHop(randomBytes(32).toString('hex'), recordKeyHash(key), identity)],
      ['stale', signHop(SECRET, recordKeyHash(key), identity, Date.now() - 60_000)],
      ['another key', signHop(SECRET, recordKeyHash(newKey()), identity)],
      [
        'another tenant, re-signed with a forged secret',
        signHop('x'.repeat(64), recordKeyHash(key), { ...identity, tenant: 'base' }),
      ],
    ];
    for (const [what, headers] of attempts) {
      const r = await refusal(url, undefined, headers);
      assert.equal(r.status, 403, what);
      assert.equal(r.body.error.id, 'HOP_FORBIDDEN', what);
    }
    // The internal route is on the admin port only: the client port does not know it.
    const onClientPort = `ws://127.0.0.1:${cluster.replicas[0].port}${hopPath}?session=${recordKeyHash(key)}`;
    assert.equal((await refusal(onClientPort, undefined, signHop(SECRET, recordKeyHash(key), identity))).status, 404);
    // Signed, but for another tenant's client: the same refusal as a local resume.
    const other = await refusal(url, undefined, signHop(SECRET, recordKeyHash(key), { ...identity, tenant: 'base' }));
    assert.equal(other.body.error.id, 'RESUME_FORBIDDEN');

    chunks.slice(0, 8).forEach((c) => client.send(c));
    client.sendJson({ type: 'end' });
    await client.next('ended', 20_000);
    assert.equal((await client.closed).code, 1000, "the session's own client was never replaced");
  });

  it('the client leaving through the hop is seen by the session: what follows waits for the next socket', async () => {
    const key = newKey();
    const tenant = 'hop-left';
    const { first } = await dropped(cluster, key, tenant, 8);
    const { client: second, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    await delay(1000); // the finals of what the first socket sent reach this one (none in flight below)
    for (let off = accepted.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    second.sendJson({ type: 'end' });
    second.ws.close(1000); // gone before the rest of the finals: they must be kept for the next socket
    await delay(3000);
    const { client: third } = await openConfigured(await replicaUrl(cluster, 0, tenant, key), configuration);
    await third.next('ended', 20_000);
    assertOneTimeline(finals([...first.messages, ...second.messages, ...third.messages]), 7);
  });

  it('what the session sent into the hop as its client left, not yet passed on, waits for the next socket', async () => {
    const key = newKey();
    const tenant = 'hop-in-flight';
    const { first } = await dropped(cluster, key, tenant, 8);
    const { client: second, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    await delay(1000);
    toReplica0.delayReplies(800); // from here, what the session sends is 800 ms on its way to the relay
    try {
      // Dictation goes on (4 KB every 100 ms, faster than real time): finals keep coming, each 800 ms
      // on its way, when the client leaves mid-way.
      for (let off = accepted.audioBytes, t = 0; t < 15; off += 4000, t++) {
        second.send(whole.subarray(off, off + 4000));
        await delay(100);
      }
      second.ws.close(1000);
      await delay(1000);
    } finally {
      toReplica0.delayReplies(0);
    }
    const { client: third, accepted: resumed } = await openConfigured(
      await replicaUrl(cluster, 0, tenant, key),
      configuration,
    );
    assert.equal(resumed.resumed, true);
    for (let off = resumed.audioBytes; off < whole.length; off += 16_000) third.send(whole.subarray(off, off + 16_000));
    third.sendJson({ type: 'end' });
    await third.next('ended', 20_000);
    assertOneTimeline(finals([...first.messages, ...second.messages, ...third.messages]), 7);
  });

  it('a client that leaves through the hop as its session ends gets the last finals and the end on its next socket', async () => {
    const key = newKey();
    const tenant = 'hop-ended-left';
    const { first } = await dropped(cluster, key, tenant, 8);
    const { client: second, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    await delay(1000);
    for (let off = accepted.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    await delay(3000); // the upstream has had it all (PACE 4): its answer to `end` comes at once
    toReplica0.delayReplies(800); // what the session sends from here is 800 ms on its way to the relay
    try {
      second.sendJson({ type: 'end' });
      await delay(300); // the session has ended on its replica; its last output is still on its way
      second.ws.close(1000);
      await delay(2000);
    } finally {
      toReplica0.delayReplies(0);
    }
    const { client: third, accepted: resumed } = await openConfigured(
      await replicaUrl(cluster, 0, tenant, key),
      configuration,
    );
    assert.equal(resumed.resumed, true, `the session waited for the client: ${JSON.stringify(resumed)}`);
    await third.next('ended', 20_000);
    assertOneTimeline(finals([...first.messages, ...second.messages, ...third.messages]), 7);
  });

  it('carries a /streams resume too (the interaction in the internal path and in the signed identity)', async () => {
    const key = newKey();
    const tenant = 'hop-streams';
    const interaction = '3f1c2b7a-9d4e-4c1a-8b2f-6e5d4c3b2a10';
    const streamsUrl = async (i: number) => {
      const token = await cluster.emulator.issueToken({ tenant, scope: 'openid streams' });
      const q = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}`, resume: key });
      return `ws://127.0.0.1:${cluster.replicas[i].port}/audio-bridge/v2/interactions/${interaction}/streams?${q}`;
    };
    const streamsConfig = { type: 'config', configuration: englishConfiguration('streams', 'audio/webm;codecs=opus') };
    const first = await openClient(await streamsUrl(0));
    first.sendJson(streamsConfig);
    const accepted = await first.next('CONFIG_ACCEPTED');
    chunks.slice(0, 8).forEach((c) => first.send(c));
    await delay(2500); // the record is written within 2 s
    first.ws.terminate();
    await delay(300);
    const hops = await metric(cluster.replicas[1].adminPort, 'speech_gateway_hops_total{result="opened"}');
    const second = await openClient(await streamsUrl(1));
    second.sendJson(streamsConfig);
    const resumed = await second.next('CONFIG_ACCEPTED');
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.sessionId, accepted.sessionId);
    assert.equal(
      await metric(cluster.replicas[1].adminPort, 'speech_gateway_hops_total{result="opened"}'),
      hops + 1,
      'through the hop',
    );
    second.sendJson({ type: 'end' });
    await second.next('ENDED', 20_000);
    assert.equal((await second.closed).code, 1000);
  });

  it("the session's replica dying closes the hopped client with 1012, so it reconnects", async () => {
    const key = newKey();
    const tenant = 'hop-owner-gone';
    await dropped(cluster, key, tenant, 8);
    const { client: second } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    await cluster.kill(0);
    const closed = await second.closed;
    assert.equal(closed.code, 1012);
    assert.match(closed.reason, /resume key/);
  });

  it("a new process at a dead owner's address under another REPLICA_ID refuses the hop (409), and the session is taken over at once", async () => {
    if (!cluster.replicas[0].child) await cluster.start(0);
    const key = newKey();
    const tenant = 'hop-not-owner';
    const { first } = await dropped(cluster, key, tenant, 16);
    const dead = cluster.replicas[0].id;
    const direct = new Redis(cluster.redis.url);
    const lastBeat = (await direct.get(`sgw:replica:${dead}`))!; // signed: its address, its time
    await cluster.kill(0);
    await cluster.start(0); // restarted in place outside Kubernetes: a new id at the same address
    // Within the dead one's heartbeat (a start may take longer than its 5 s TTL here): it is still there.
    await direct.set(`sgw:replica:${dead}`, lastBeat, 'PX', 5000);
    direct.disconnect();
    const { client: second, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
    assert.equal(accepted.resumed, true, 'taken over at the first attempt, not sent to reconnect');
    assert.equal(await metric(cluster.replicas[1].adminPort, 'speech_gateway_hops_total{result="not_owner"}'), 1);
    assert.equal(await metric(cluster.replicas[1].adminPort, 'speech_gateway_takeovers_total{from="crash"}'), 1);
    for (let off = accepted.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    assert.equal((await second.closed).code, 1000);
    const all = finals([...first.messages, ...second.messages]); // what the killed replica held unfinalised may be missing
    for (let k = 1; k < all.length; k++)
      assert.ok(all[k].start > all[k - 1].end - PACKET, `final ${k} once, in order: ${JSON.stringify(all)}`);
    assert.ok(all.at(-1)!.end > 7, 'to the end of the audio');
  });
});

describe('without CLUSTER_SECRET', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { PACE: '4' });
  }, 60_000);
  afterAll(() => cluster?.close());

  it('the internal route does not exist, and a resume for a session live on the other replica is 503 RESUME_UNAVAILABLE', async () => {
    const key = newKey();
    await dropped(cluster, key, 'no-hop', 8);
    const identity: HopIdentity = {
      tenant: 'no-hop',
      subject: await subjectOf(cluster, 'no-hop'),
      endpoint: 'transcribe',
      notices: false,
      owner: cluster.replicas[0].id,
      ownerUrl: `ws://127.0.0.1:${cluster.replicas[0].adminPort}`,
      from: cluster.replicas[1].id,
    };
    const r = await refusal(
      `ws://127.0.0.1:${cluster.replicas[0].adminPort}${hopPath}?session=${recordKeyHash(key)}`,
      undefined,
      signHop(SECRET, recordKeyHash(key), identity),
    );
    assert.equal(r.status, 404);
    const elsewhere = await refusal(await replicaUrl(cluster, 1, 'no-hop', key));
    assert.equal(elsewhere.status, 503);
    assert.equal(elsewhere.body.error.id, 'RESUME_UNAVAILABLE');
  });
});

/** The `sub` of the emulator's tokens for `tenant` (the identity a replica would have verified). */
async function subjectOf(cluster: Cluster, tenant: string): Promise<string> {
  const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sub as string;
}
