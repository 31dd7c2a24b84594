// What a Redis writer cannot do. Someone with write access to Redis and nothing else (no
// CLUSTER_SECRET, no resume key, no token) rewrites what the replicas keep there for each other: a
// live session's record (its owner's address), a replica's heartbeat, a session's position, or a
// whole made-up record. Two real replicas with a CLUSTER_SECRET, one redis-server, the emulator, and
// an "attacker" WebSocket server on loopback that accepts whatever reaches it. No resume is ever
// carried there, the resume key never travels between replicas, nothing made up reaches a client,
// and the client's own session goes on with every final.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { recordKeyHash, signHop, type HopIdentity } from '../../src/cluster/index.js';
import { droppedSession, openWhenReady, replicaUrl, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { openConfigured, refusal, type TestClient } from '../support/stack.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const SECRET = randomBytes(32).toString('hex');
const chunks = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk
const whole = Buffer.concat(chunks);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const newKey = () => randomBytes(18).toString('base64url');
const INJECTED = 'discontinue warfarin';
/** A timeline at the stream's start (a version-1 record held it flat, later ones under `timeline`). */
const TIMELINE = { offset: 0, finalUntil: 0, mediaReceived: 0, audioBytes: 0, segment: 0, seq: 0 };

/** Whatever connects to it: its request line and headers. */
interface Attacker {
  url: string;
  seen: string[];
  close(): Promise<void>;
}

async function startAttacker(): Promise<Attacker> {
  const seen: string[] = [];
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('connection', (_ws, req) => seen.push(`${req.url} ${JSON.stringify(req.headers)}`));
  await new Promise((r) => wss.once('listening', r));
  const { port } = wss.address() as AddressInfo;
  return { url: `ws://127.0.0.1:${port}`, seen, close: () => new Promise((r) => wss.close(() => r(undefined))) };
}

const resumeOn = (cluster: Cluster, i: number, tenant: string, key: string) =>
  openWhenReady(() => replicaUrl(cluster, i, tenant, key), configuration);

/** The rest of the stream from `audioBytes`, its end, and the session's `ended`. */
async function finish(client: TestClient, audioBytes: number): Promise<void> {
  for (let off = audioBytes; off < whole.length; off += 16_000) client.send(whole.subarray(off, off + 16_000));
  client.sendJson({ type: 'end' });
  await client.next('ended', 30_000);
}

function assertEveryFinal(messages: Array<Record<string, any>>): void {
  const all = finals(messages);
  for (let k = 1; k < all.length; k++)
    assert.ok(all[k].start > all[k - 1].end - 0.06, `final ${k} once, in order: ${JSON.stringify(all)}`);
  assert.ok(all.length > 0 && all.at(-1)!.end > 7, `finals to the end of the audio: ${JSON.stringify(all)}`);
}

const subjectOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sub;

describe('a Redis writer against the replicas', () => {
  let cluster: Cluster;
  let redis: Redis;
  let attacker: Attacker;
  // Replica 0's internal address is a proxy that keeps what reaches it: what one replica sends another.
  let toReplica0: TcpProxy;
  beforeAll(async () => {
    attacker = await startAttacker();
    toReplica0 = await startTcpProxy(() => cluster.replicas[0].adminPort);
    cluster = await startCluster(
      2,
      { CLUSTER_SECRET: SECRET, PACE: '4', RESUME_GRACE_SECONDS: '15' },
      (i): Record<string, string> => (i === 0 ? { ADVERTISE_URL: `ws://127.0.0.1:${toReplica0.port}` } : {}),
    );
    redis = new Redis(cluster.redis.url);
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    await cluster?.close();
    await toReplica0?.close();
    await attacker?.close();
  });

  it("a live record's owner address rewritten to another host: no resume goes there, the resume key never leaves the client's replica, the client resumes its own session", async () => {
    await cluster.allUp();
    const key = newKey();
    const tenant = 'forged-owner-url';
    const { first, sessionId } = await droppedSession(cluster, 0, key, tenant, chunks.slice(0, 16), configuration);
    const rec = `sgw:rec:${recordKeyHash(key)}`;
    const stored = (await redis.get(rec))!;
    assert.ok(stored.includes(`"ownerUrl":"ws://127.0.0.1:${toReplica0.port}"`));
    await redis.set(rec, stored.replace(/"ownerUrl":"[^"]*"/, `"ownerUrl":"${attacker.url}"`), 'KEEPTTL');
    // The heartbeat too, unsigned and signed with a made-up MAC.
    const beat = `sgw:replica:${cluster.replicas[0].id}`;
    await redis.set(beat, attacker.url, 'PX', 5000);

    const { client: second, accepted } = await resumeOn(cluster, 1, tenant, key);
    assert.equal(accepted.resumed, true);
    assert.equal(accepted.sessionId, sessionId, 'the session on replica 0, carried over the hop');
    await finish(second, accepted.audioBytes);
    assertEveryFinal([...first.messages, ...second.messages]);
    assert.deepEqual(attacker.seen, [], 'nothing reached the address Redis named');
    const heads = toReplica0.connections.map((c) => c.head);
    assert.ok(
      heads.some((h) => h.includes(`session=${recordKeyHash(key)}`)),
      'the hop reached replica 0',
    );
    assert.ok(
      heads.every((h) => !h.includes(key)),
      'the resume key is not in what one replica sends another',
    );
  });

  it('a heartbeat rewritten to another address (bare, or with a made-up MAC) sends no resume there', async () => {
    await cluster.allUp();
    const key = newKey();
    const tenant = 'forged-heartbeat';
    const { first } = await droppedSession(cluster, 0, key, tenant, chunks.slice(0, 16), configuration);
    const seenBefore = attacker.seen.length;
    const beat = `sgw:replica:${cluster.replicas[0].id}`;
    const forged = JSON.stringify({ url: attacker.url, at: Date.now(), mac: 'ab'.repeat(32) });
    for (const value of [attacker.url, forged]) {
      await redis.set(beat, value, 'PX', 5000);
      const r = await refusal(await replicaUrl(cluster, 1, tenant, key)).catch(() => undefined);
      if (r) assert.equal(r.status, 503, JSON.stringify(r.body));
    }
    const { client: second, accepted } = await resumeOn(cluster, 1, tenant, key);
    assert.equal(accepted.resumed, true);
    await finish(second, accepted.audioBytes);
    assertEveryFinal([...first.messages, ...second.messages]);
    assert.equal(attacker.seen.length, seenBefore, 'nothing reached the address the heartbeat named');
  });

  it('a made-up record (no version, or an older one), handed over with a final the client never spoke: nothing of it reaches the client', async () => {
    await cluster.allUp();
    const tenant = 'forged-record';
    const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const made = (v: number | undefined) => ({
      v,
      owner: 'replica-gone',
      ownerUrl: attacker.url,
      state: 'handed_over',
      tenant,
      subject: subjectOf(token),
      endpoint: 'transcribe',
      sessionKey: randomBytes(8).toString('hex'),
      config: configuration,
      accepted: { sessionId: 'made-up' },
      kind: 'webm',
      init: chunks[0].toString('base64'),
      ...TIMELINE,
      missed: [JSON.stringify({ type: 'transcript', data: { text: INJECTED, start: 0, end: 1, isFinal: true } })],
      sealed: '',
      timeline: undefined as unknown,
      updatedAt: Date.now(),
    });
    for (const v of [undefined, 1, 2, 3]) {
      const key = newKey();
      const record = made(v);
      if (v === 2 || v === 3) record.timeline = { kind: 'webm', ...TIMELINE };
      await redis.set(`sgw:rec:${recordKeyHash(key)}`, JSON.stringify(record), 'PX', 20_000);
      const got: Array<Record<string, any>> = [];
      try {
        const { client, accepted } = await openConfigured(await replicaUrl(cluster, 1, tenant, key), configuration);
        assert.notEqual(accepted.resumed, true, `v${v}: not resumed from a made-up record`);
        await delay(1500);
        got.push(...client.messages);
        client.ws.close();
      } catch (err) {
        assert.ok([403, 409, 503].includes((err as { status?: number }).status ?? 0), String(err));
      }
      assert.ok(!JSON.stringify(got).includes(INJECTED), `v${v}: the made-up final reached the client`);
    }
    assert.deepEqual(attacker.seen, []);
  });

  it("a session's position rewritten to skip every final: its successor after a crash still delivers them", async () => {
    await cluster.allUp();
    const key = newKey();
    const tenant = 'forged-position';
    const { first } = await droppedSession(cluster, 0, key, tenant, chunks.slice(0, 16), configuration);
    const owner = cluster.replicas[0].id;
    const field = recordKeyHash(key).slice(0, 16);
    const real = (await redis.hget(`sgw:pos:${owner}`, field))!;
    assert.ok(real, 'the owner wrote its position');
    // The position's format, with a timeline that says everything up to 10^6 s was delivered.
    const skipAll = JSON.stringify([Date.now() + 1000, 0, 1e6, 4, 60_000, 0, 99, null, null, null, null]);
    await redis.hset(`sgw:pos:${owner}`, field, skipAll);
    await cluster.kill(0);
    await delay(5500); // its heartbeat gone: the session is taken over from its record
    const { client: second, accepted } = await resumeOn(cluster, 1, tenant, key);
    assert.equal(accepted.resumed, true);
    await finish(second, accepted.audioBytes);
    const after = finals(second.messages);
    assert.ok(after.length > 0 && after.at(-1)!.end > 7, `finals after the takeover: ${JSON.stringify(after)}`);
    assert.ok(finals(first.messages).length > 0);
  });

  it('a signed hop meant for another address, or from a replica that is not alive, is refused by the owner', async () => {
    await cluster.allUp();
    const key = newKey();
    const tenant = 'hop-binding';
    await droppedSession(cluster, 0, key, tenant, chunks.slice(0, 8), configuration);
    const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const identity: HopIdentity = {
      tenant,
      subject: subjectOf(token),
      endpoint: 'transcribe',
      notices: false,
      owner: cluster.replicas[0].id,
      ownerUrl: `ws://127.0.0.1:${toReplica0.port}`,
      from: cluster.replicas[1].id,
    };
    const url = `ws://127.0.0.1:${cluster.replicas[0].adminPort}/internal/hop/audio-bridge/v2/transcribe?session=${recordKeyHash(key)}`;
    for (const [what, i] of [
      ['meant for another address', { ...identity, ownerUrl: attacker.url }],
      ['from no live replica', { ...identity, from: 'replica-that-never-was' }],
      ['from the owner itself', { ...identity, from: cluster.replicas[0].id }],
    ] as const) {
      const r = await refusal(url, undefined, signHop(SECRET, recordKeyHash(key), i));
      assert.equal(r.status, 403, what);
      assert.equal(r.body.error.id, 'HOP_FORBIDDEN', what);
    }
    // The resume key in the URL, as the release before sent it, finds no session.
    const old = await refusal(url.replace(/session=.*/, `resume=${key}`), undefined, signHop(SECRET, key, identity));
    assert.equal(old.status, 403);
  });
});
