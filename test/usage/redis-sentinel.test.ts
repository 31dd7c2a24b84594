// Redis behind Sentinel, from real parts (sentinel.ts: a primary, its replica, three sentinels): the
// gateway finds the primary through REDIS_SENTINELS/REDIS_SENTINEL_NAME, sessions end with their
// ledger rows and Redis is up. The primary SIGKILLed mid-session: the sentinels promote the replica,
// the session ends with every final and the ledger holds the credits its upstream session reported
// (events of the outage go to the journal, replayed on the new primary), and a new session's row is
// written to the new primary.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import type { EmulatorSession } from '../../src/emulator/index.js';
import { chromeChunks } from '../support/fixtures.js';
import { metric } from '../support/metrics.js';
import { configured, englishConfiguration, startStack, type Stack, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { endedLedgerSessions, type LedgerSession } from '../support/usage-api.js';
import { delay, until } from '../support/wait.js';
import { PRIMARY_NAME, startSentinels, type TestSentinels } from './sentinel.js';

const API = 'sentinel-usage-token';
const WEBM = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk

let topology: TestSentinels;
let stack: Stack | undefined;
beforeAll(async () => {
  topology = await startSentinels();
}, 60_000);
afterAll(() => topology?.stop());
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const start = async () =>
  (stack = await startStack({
    REDIS_SENTINELS: topology.sentinels,
    REDIS_SENTINEL_NAME: PRIMARY_NAME,
    USAGE_API_TOKEN: API,
  }));

async function opened(s: Stack): Promise<TestClient> {
  const c = await s.connect('transcribe');
  await configured(c, englishConfiguration('transcribe', 'audio/webm;codecs=opus'));
  return c;
}

async function send(c: TestClient, chunks: Buffer[]): Promise<void> {
  for (const chunk of chunks) {
    c.send(chunk);
    await delay(250);
  }
}

async function ended(c: TestClient): Promise<void> {
  c.sendJson({ type: 'end' });
  await c.next('ended', 30_000);
  assert.equal((await c.closed).code, 1000);
}

/** The credits the upstream session reported in its usage message. */
const upstreamCredits = (u: EmulatorSession) =>
  (u.sent as Array<{ type: string; credits?: number }>).find((m) => m.type === 'usage')?.credits;

/** The ledger row's credits are the upstream session's, and the client got every final it sent. */
function assertAccounted(c: TestClient, u: EmulatorSession, row: LedgerSession | undefined): void {
  assert.ok(row, 'the session has its ledger row');
  assert.equal(row.outcome, 'ended');
  assert.equal(row.estimated, false, 'the final figure, not an estimate');
  assert.ok(upstreamCredits(u)! > 0, 'the upstream reported credits');
  assert.ok(Math.abs(row.credits - upstreamCredits(u)!) < 1e-6, `${row.credits} vs ${upstreamCredits(u)}`);
  const sent = finals(u.sent as Array<Record<string, any>>);
  assert.ok(sent.length > 0, 'the upstream sent finals');
  assert.deepEqual(finals(c.messages), sent, 'every final reached the client');
}

/** The ended ledger row whose session key is not in `seen` yet (then it is). */
async function newRow(s: Stack, seen: Set<string>): Promise<LedgerSession | undefined> {
  const rows = await endedLedgerSessions(s, API, { count: seen.size + 1 });
  const row = rows.find((r) => !seen.has(r.sessionKey));
  if (row) seen.add(row.sessionKey);
  return row;
}

/** The data node on `port` is a primary now and holds the session's ledger row. */
async function assertOnPrimary(port: number, sessionKey: string): Promise<void> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await r.connect();
  try {
    assert.equal(((await r.role()) as unknown[])[0], 'master');
    assert.equal(await r.hget(`sg:usage:s:${sessionKey}`, 'sessionKey'), sessionKey);
  } finally {
    r.disconnect();
  }
}

describe('Redis behind Sentinel', () => {
  it('finds the primary through the sentinels: a session ends with its ledger row, Redis is up', async () => {
    const s = await start();
    const c = await opened(s);
    await send(c, WEBM.slice(0, 8));
    await ended(c);
    const rows = await endedLedgerSessions(s, API, { count: 1 });
    assertAccounted(c, s.emulator.sessions.at(-1)!, rows.at(-1));
    assert.equal(await metric(s.gateway.server.adminPort, 'speech_gateway_redis_up'), 1);
  });

  it('the primary SIGKILLed mid-session: the replica promoted, the session accounted in full, a new one written there', async () => {
    const s = await start();
    const seen = new Set((await endedLedgerSessions(s, API)).map((r) => r.sessionKey));
    const c = await opened(s);
    await send(c, WEBM.slice(0, 8));
    topology.killPrimary();
    const streaming = send(c, WEBM.slice(8));
    const port = s.gateway.server.adminPort;
    await until(async () => (await metric(port, 'speech_gateway_redis_up')) === 0, 'the gateway to see Redis lost');
    await until(async () => (await topology.primaryPortNow()) === topology.replicaPort, 'the replica promoted', {
      withinMs: 30_000,
      everyMs: 200,
    });
    await streaming;
    assert.equal(c.ws.readyState, c.ws.OPEN, 'the session outlived the failover');
    await ended(c);
    await until(async () => (await metric(port, 'speech_gateway_redis_up')) === 1, 'redis up again');
    assertAccounted(c, s.emulator.sessions.at(-1)!, await newRow(s, seen));

    const next = await opened(s);
    await send(next, WEBM.slice(0, 4));
    await ended(next);
    const row = await newRow(s, seen);
    assertAccounted(next, s.emulator.sessions.at(-1)!, row);
    await assertOnPrimary(topology.replicaPort, row!.sessionKey);
  });
});
