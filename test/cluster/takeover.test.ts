// A session taken over after its replica crashed, with two real gateway processes sharing one
// redis-server and one emulator: the replica holding a resumable session is SIGKILLed mid-stream;
// the client comes back on the other replica with its key at once, which takes the session over from
// its record (the dead replica's heartbeat has not expired, but its address refuses connections): one
// timeline, every final once, one ledger session whose usage is the sum of both upstream sessions,
// and, as the client resends from the count it is given (the start of the oldest Cluster its finals
// do not cover whole), nothing lost.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { recordKeyHash } from '../../src/cluster/index.js';
import { replicaUrl, resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { metric } from '../support/metrics.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, refusal, resumeUrl, startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { ledgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const API_TOKEN = 'takeover-usage-token';
const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const tenant = 'takeover';

describe('takeover after the owner is SIGKILLed', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { USAGE_API_TOKEN: API_TOKEN });
  });
  afterAll(() => cluster?.close());

  it('the other replica takes the session over from its record: one timeline, finals once, usage summed, no media lost', async () => {
    const key = newResumeKey();
    const first = await openClient(await replicaUrl(cluster, 0, tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, 12)) {
      first.send(piece);
      await delay(100);
    }
    first.sendJson({ type: 'flush' });
    await first.next('flushed', 10_000);
    for (const piece of pieces.slice(12, 18)) {
      // received; what no final covers yet dies with the replica
      first.send(piece);
      await delay(100);
    }
    await delay(2500); // the record's periodic refresh, and the ledger's write of the flush's usage
    const finalsBefore = finals(first.messages);
    await cluster.kill(0);
    assert.equal((await first.closed).code, 1006);

    // Its heartbeat lasts 5 s more, but its address refuses connections: the first resume takes over.
    const second = await openClient(await replicaUrl(cluster, 1, tenant, key));
    second.sendJson({ type: 'config', configuration });
    const accepted = await second.next('CONFIG_ACCEPTED');
    assert.equal(accepted.resumed, true);
    assert.ok(accepted.audioBytes > 0 && accepted.audioBytes <= stream.length);
    await resendFrom(second, stream, accepted.audioBytes);
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);

    const all = finals([...first.messages, ...second.messages]);
    assert.deepEqual(
      [...first.messages, ...second.messages].filter((m) => m.type === 'error'),
      [],
    );
    assert.ok(finalsBefore.length > 0 && all.length > finalsBefore.length, 'finals before and after the crash');
    // Once: a final overlaps the one before by less than one of Chromium's 60 ms packets (where the replay starts).
    for (let i = 1; i < all.length; i++)
      assert.ok(
        all[i].start >= all[i - 1].end - 0.06 - 1e-6,
        `final ${i} (${all[i].start}-${all[i].end}) once, after ${all[i - 1].end}`,
      );
    assert.ok(all.at(-1)!.end > 8.5, `one timeline to the end of the audio (${all.at(-1)!.end})`);

    const port = cluster.replicas[1].adminPort;
    assert.equal(await metric(port, 'speech_gateway_takeovers_total{from="crash"}'), 1);
    const lost = await metric(port, 'speech_gateway_takeover_lost_media_seconds_total');
    const gap = Math.max(...all.slice(1).map((f, i) => f.start - all[i].end));
    console.log(
      `takeover after SIGKILL: ${lost.toFixed(2)} s of media counted lost; the largest gap between finals ${gap.toFixed(2)} s`,
    );
    assert.equal(lost, 0, 'the client resent from a point the successor goes on from: nothing lost');
    assert.ok(gap <= 0.01, `no gap between finals (${gap} s)`);

    const res = await fetch(`http://127.0.0.1:${port}/v1/usage/sessions?tenant=${tenant}`, {
      headers: { authorization: `Bearer ${API_TOKEN}` },
    });
    const rows = ((await res.json()) as { sessions: any[] }).sessions;
    assert.equal(rows.length, 1, 'one ledger session');
    assert.equal(rows[0].segments.length, 2, 'two upstream segments');
    const upstream = cluster.emulator.sessions
      .filter((s) => s.tenant === tenant)
      .map((s) => s.sent as Array<{ type: string; credits?: number }>);
    const reported = upstream.reduce(
      (n, sent) =>
        n +
        (sent.find((m) => m.type === 'usage')?.credits ??
          sent.filter((m) => m.type === 'delta_usage').reduce((d, m) => d + m.credits!, 0)),
      0,
    );
    assert.ok(Math.abs(rows[0].credits - reported) < 1e-6, `ledger ${rows[0].credits} = upstream ${reported}`);
  });
});

describe('a replica taken for dead while it is not', () => {
  let redis: TestRedis;
  let stack: Stack;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({ REDIS_URL: redis.url, USAGE_API_TOKEN: API_TOKEN, MAX_SESSIONS_PER_TENANT: '1' });
  });
  afterAll(async () => {
    await stack?.close();
    await redis?.stop();
  });

  it("leaves a session another replica took over: its client is closed 4409, its upstream session ended with its usage recorded, the ledger session and the slot stay the new owner's", async () => {
    const key = newResumeKey();
    const url = async (k: string) => resumeUrl(stack.base, 'base', k, await stack.token('openid transcribe'));
    const client = await openClient(await url(key));
    client.sendJson({ type: 'config', configuration });
    await client.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, 8)) {
      client.send(piece);
      await delay(100);
    }
    await client.next('transcript', 10_000);
    await delay(2200);
    // What another replica's takeover writes (it found this one's heartbeat gone during a Redis blip).
    const direct = new Redis(redis.url);
    const recordKey = `sgw:rec:${recordKeyHash(key)}`;
    const record = JSON.parse((await direct.get(recordKey))!);
    await direct.set(recordKey, JSON.stringify({ ...record, owner: 'replica-elsewhere' }), 'PX', 60_000);
    direct.disconnect();
    for (const piece of pieces.slice(8, 12)) {
      if (client.ws.readyState === client.ws.OPEN) client.send(piece);
      await delay(100);
    }
    const closed = await Promise.race([client.closed, delay(5000).then(() => undefined)]);
    assert.equal(closed?.code, 4409, 'closed as replaced');
    const upstream = stack.emulator.sessions.at(-1)!;
    for (let t = 0; t < 50 && !upstream.closed; t++) await delay(100);
    assert.ok(
      upstream.received.some((m) => m.kind === 'end'),
      'its upstream session was ended with `end`',
    );
    const usage = (upstream.sent as Array<{ type: string; credits?: number }>).find((m) => m.type === 'usage');
    assert.ok(usage && usage.credits! > 0, 'and answered with its final usage');
    await delay(500); // the ledger's write
    const rows = await ledgerSessions(stack, API_TOKEN);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].end, null, 'the ledger session is not ended here: the new owner goes on with it');
    assert.ok(
      Math.abs(rows[0].credits - usage!.credits!) < 1e-6,
      `the ledger has its usage (${rows[0].credits} = ${usage!.credits})`,
    );
    assert.equal((await refusal(await url(newResumeKey()))).status, 429, 'the slot is still held');
  });
});

describe('a session whose key another session claimed (its claim had lapsed)', () => {
  let redis: TestRedis;
  let stack: Stack;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({ REDIS_URL: redis.url, USAGE_API_TOKEN: API_TOKEN });
  });
  afterAll(async () => {
    await stack?.close();
    await redis?.stop();
  });

  it('ends whole: its client gets RESUME_KEY_IN_USE and 4409, its upstream session `end`, its ledger session ends with the usage', async () => {
    const key = newResumeKey();
    const url = resumeUrl(stack.base, 'base', key, await stack.token('openid transcribe'));
    const client = await openClient(url);
    client.sendJson({ type: 'config', configuration });
    await client.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, 8)) {
      client.send(piece);
      await delay(100);
    }
    await client.next('transcript', 10_000);
    // What another replica writes for a new session with this key, had this one's record expired.
    const direct = new Redis(redis.url);
    const recordKey = `sgw:rec:${recordKeyHash(key)}`;
    const record = JSON.parse((await direct.get(recordKey))!);
    await direct.set(
      recordKey,
      JSON.stringify({ ...record, owner: 'replica-elsewhere', sessionKey: 'another-session', timeline: undefined }),
      'PX',
      60_000,
    );
    direct.disconnect();
    for (const piece of pieces.slice(8, 16)) {
      if (client.ws.readyState === client.ws.OPEN) client.send(piece);
      await delay(100);
    }
    const closed = await Promise.race([client.closed, delay(15_000).then(() => undefined)]);
    assert.equal(closed?.code, 4409);
    assert.deepEqual(
      client.messages.filter((m) => m.type === 'error').map((m) => m.error.id),
      ['RESUME_KEY_IN_USE'],
    );
    const upstream = stack.emulator.sessions.at(-1)!;
    for (let t = 0; t < 50 && !upstream.closed; t++) await delay(100);
    assert.ok(
      upstream.received.some((m) => m.kind === 'end'),
      'its upstream session was ended with `end`',
    );
    const usage = (upstream.sent as Array<{ type: string; credits?: number }>).find((m) => m.type === 'usage');
    let rows = await ledgerSessions(stack, API_TOKEN);
    for (let t = 0; t < 50 && rows[0]?.end === null; t++)
      rows = await delay(100).then(() => ledgerSessions(stack, API_TOKEN));
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0].end, null, 'its ledger session ended');
    assert.ok(
      usage && Math.abs(rows[0].credits - usage.credits!) < 1e-6,
      `with the upstream's final usage (${rows[0].credits} = ${usage?.credits})`,
    );
    const reader = new Redis(redis.url);
    const left = JSON.parse((await reader.get(recordKey))!);
    reader.disconnect();
    assert.equal(left.sessionKey, 'another-session', "the other session's record is left alone");
  });
});
