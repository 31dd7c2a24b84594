// The drain (SIGTERM path, gateway.stop()) over real sockets: /readyz says 503 at once while the
// gateway keeps serving; a new socket is accepted and closed with 1012 (an HTTP refusal would make
// the vendor SDK give up for good); running sessions go on for DRAIN_SECONDS, then end gracefully
// with every final transcript, usage and the end message; a stalled upstream cannot keep a session
// open in the ledger; the drain runs once however often it is asked for.
import assert from 'node:assert/strict';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { metrics } from '../../src/telemetry/index.js';
import { UsageHttpApi } from '../../src/usage/api.js';
import type { LedgerSession } from '../support/usage-api.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { chromeChunks } from '../support/fixtures.js';
import { configured, startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { get } from '../support/usage.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const API_TOKEN = 'drain-ops-token';
/** What headless Chromium sent for 9 s of speech (WebM/PCM, transcoded to Ogg/Opus upstream). */
const NINE_SECONDS = chromeChunks('webm-pcm-f32');
const OPUS_CHUNKS = chromeChunks('webm-opus');

// The ledger is read from Redis after stop(): what the stopped gateway left recorded.
let redis: TestRedis;
let ledgerRedis: ReturnType<typeof createRedisClient>;
let ledger: UsageHttpApi;
let stack: Stack | undefined;
let from = '';
beforeAll(async () => {
  redis = await startRedis();
  ledgerRedis = createRedisClient({ url: redis.url });
  await ledgerRedis.connect();
  ledger = new UsageHttpApi(new RedisUsageStore(ledgerRedis, 'sg:usage:', 86_400_000, Date.now), API_TOKEN);
});
afterAll(async () => {
  ledgerRedis?.disconnect();
  await redis?.stop();
});
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

async function start(env: Record<string, string>): Promise<Stack> {
  from = new Date().toISOString();
  stack = await startStack({ REDIS_URL: redis.url, ...env });
  return stack;
}

/** The ledger's rows for this test's sessions. */
async function ledgerRows(): Promise<LedgerSession[]> {
  const { status, body } = await get(ledger, `/v1/usage/sessions?tenant=base&from=${from}`, API_TOKEN);
  assert.equal(status, 200);
  return body.sessions;
}

const status = async (s: Stack, path: string) =>
  (await fetch(`http://127.0.0.1:${s.gateway.server.port}${path}`)).status;

async function drainCount(result: 'ended' | 'aborted'): Promise<number> {
  return (await metrics.drainSessions.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
}

describe('drain', () => {
  it('keeps serving: /readyz 503 and /healthz 200 at once; a new socket gets 101 then close 1012, not HTTP 503', async () => {
    const s = await start({ DRAIN_SECONDS: '2' });
    const running = await s.connect('transcribe');
    await configured(running, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' });
    const stopped = s.gateway.stop();
    assert.equal(await status(s, '/readyz'), 503);
    assert.equal(await status(s, '/healthz'), 200);
    const late = await s.connect('transcribe'); // rejects on an HTTP refusal
    const { code, reason } = await late.closed;
    assert.equal(code, 1012);
    assert.match(reason, /restart/);
    assert.equal(s.emulator.sessions.length, 1, 'the late socket opened no upstream session');
    assert.equal((await running.closed).code, 1012, 'the running session is ended by the drain, told to reconnect');
    assert.deepEqual(running.types().slice(-2), ['usage', 'ended']);
    await stopped;
  });

  it('a session with 9 s of audio held for pacing (PACE=1, DRAIN_SECONDS=4) gets every final transcript, usage and its end; the ledger has it final', async () => {
    const s = await start({ PACE: '1', DRAIN_SECONDS: '4', END_TIMEOUT_MS: '2000' });
    const client = await s.connect('transcribe');
    await configured(client, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=pcm' });
    for (const chunk of NINE_SECONDS) client.send(chunk);
    const stopped = s.gateway.stop();
    const { code } = await client.closed;
    await stopped;

    const f = finals(client.messages);
    for (let i = 1; i < f.length; i++) assert.equal(f[i].start, f[i - 1].end, `final ${i} follows the one before`);
    assert.equal(f[0]?.start, 0);
    assert.ok(f.at(-1)!.end > 8.9, `the finals cover the 9 s; they end at ${f.at(-1)?.end}`);
    assert.deepEqual(client.types().slice(-2), ['usage', 'ended']);
    assert.equal(code, 1012);
    const [row, ...more] = await ledgerRows();
    assert.equal(more.length, 0);
    assert.ok(row.end !== null, 'closed in the ledger');
    assert.equal(row.estimated, false);
    assert.equal(row.credits, client.messages.find((m) => m.type === 'usage')!.credits);
  });

  it('a session whose upstream stalls is finished after END_TIMEOUT_MS with its provisional usage, estimated and closed in the ledger', async () => {
    const s = await start({ PACE: '1000', DRAIN_SECONDS: '1', END_TIMEOUT_MS: '1000' });
    const client = await s.connect('transcribe');
    await configured(client, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' });
    for (const chunk of OPUS_CHUNKS.slice(0, 12)) client.send(chunk);
    client.sendJson({ type: 'flush' });
    const delta = await client.next('delta_usage');
    s.emulator.faults.stall = true;
    const aborted = await drainCount('aborted');
    const started = Date.now();
    await s.gateway.stop();
    const { code } = await client.closed;

    assert.ok(Date.now() - started >= 2000, 'DRAIN_SECONDS, then END_TIMEOUT_MS for the end');
    assert.equal(code, 1014);
    assert.equal(client.messages.at(-1)?.error?.id, 'UPSTREAM_TIMEOUT');
    assert.equal(client.types().includes('ended'), false);
    const [row, ...more] = await ledgerRows();
    assert.equal(more.length, 0);
    assert.ok(row.end !== null, 'closed in the ledger');
    assert.equal(row.estimated, true);
    assert.equal(row.credits, delta.credits);
    assert.equal(await drainCount('aborted'), aborted + 1);
  });

  it('stop() twice, and drain() besides, drain once', async () => {
    const s = await start({ DRAIN_SECONDS: '1' });
    const client = await s.connect('transcribe');
    await configured(client, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' });
    for (const chunk of OPUS_CHUNKS.slice(0, 4)) client.send(chunk);
    const ended = await drainCount('ended');
    const first = s.gateway.stop();
    await delay(100);
    await Promise.all([first, s.gateway.stop(), s.gateway.server.drain(1)]);
    assert.equal((await client.closed).code, 1012);
    assert.equal(client.types().filter((t) => t === 'ended').length, 1);
    assert.equal(await drainCount('ended'), ended + 1, 'the session is counted once');
  });
});
