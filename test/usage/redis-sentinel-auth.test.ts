// Redis behind Sentinel with AUTH on both sides (sentinel.ts: the data nodes require one password,
// the sentinels another): with REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD the usage ledger, the
// audit store and the cluster all reach the primary (a session's ledger row, its audit events and
// the replica's heartbeat are there); with a wrong data or sentinel password the gateway starts all
// the same, Redis down (the journal takes the ledger's events).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { metric } from '../support/metrics.js';
import { configured, englishConfiguration, startStack, type Stack } from '../support/stack.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { delay, until } from '../support/wait.js';
import { PRIMARY_NAME, startSentinels, type SentinelAuth, type TestSentinels } from './sentinel.js';

const API = 'sentinel-auth-usage-token';
const AUTH: SentinelAuth = {
  password: `data-${randomBytes(12).toString('hex')}`,
  sentinelPassword: `sentinel-${randomBytes(12).toString('hex')}`,
};

let topology: TestSentinels;
let stack: Stack | undefined;
beforeAll(async () => {
  topology = await startSentinels(AUTH);
}, 60_000);
afterAll(() => topology?.stop());
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const start = async (password = AUTH.password, sentinelPassword = AUTH.sentinelPassword) =>
  (stack = await startStack({
    REDIS_SENTINELS: topology.sentinels,
    REDIS_SENTINEL_NAME: PRIMARY_NAME,
    REDIS_PASSWORD: password,
    REDIS_SENTINEL_PASSWORD: sentinelPassword,
    USAGE_API_TOKEN: API,
  }));

/** The primary's keys matching `pattern`, read with the data nodes' password. */
async function primaryKeys(pattern: string): Promise<string[]> {
  const r = new Redis({ port: topology.primaryPort, host: '127.0.0.1', password: AUTH.password, lazyConnect: true });
  await r.connect();
  try {
    return await r.keys(pattern);
  } finally {
    r.disconnect();
  }
}

describe('Redis behind Sentinel with AUTH', () => {
  it('the ledger, the audit store and the cluster reach the primary with both passwords', async () => {
    const s = await start();
    const c = await s.connect('transcribe');
    await configured(c, englishConfiguration('transcribe', 'audio/webm;codecs=opus'));
    c.sendJson({ type: 'end' });
    assert.equal((await c.closed).code, 1000);
    const rows = await endedLedgerSessions(s, API, { count: 1 });
    assert.equal(rows.length, 1);
    assert.equal(await metric(s.gateway.server.adminPort, 'speech_gateway_redis_up'), 1);
    await until(async () => (await primaryKeys('sg:audit:base')).length === 1, 'audit events on the primary');
    assert.ok((await primaryKeys('sgw:replica:*')).length >= 1, "the replica's heartbeat on the primary");
  });

  it('a wrong data password: the gateway starts, Redis down', async () => {
    const s = await start(`wrong-${randomBytes(8).toString('hex')}`);
    await delay(1000);
    assert.equal(await metric(s.gateway.server.adminPort, 'speech_gateway_redis_up'), 0);
  });

  // No sentinel names a primary: ioredis's connect() would wait for one, the gateway waits 2 s a client.
  it('a wrong sentinel password: the gateway starts within the bounded waits, Redis down', async () => {
    const began = Date.now();
    const s = await start(AUTH.password, `wrong-${randomBytes(8).toString('hex')}`);
    assert.ok(Date.now() - began < 15_000, `started in ${Date.now() - began} ms`);
    assert.equal(await metric(s.gateway.server.adminPort, 'speech_gateway_redis_up'), 0);
  });
});
