// Redis behind Sentinel, a planned failover (SENTINEL FAILOVER: the primary alive, demoted to a
// replica of the one promoted seconds after the switch, and taking writes until then): once the
// sentinels announce the switch the gateway's clients are on the new primary, and a session after it
// has its ledger row there, beside the one written before it.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, it } from 'vitest';
import { metric } from '../support/metrics.js';
import { configured, englishConfiguration, startStack, type Stack } from '../support/stack.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { delay, until } from '../support/wait.js';
import { PRIMARY_NAME, startSentinels, type TestSentinels } from './sentinel.js';

const API = 'sentinel-switch-usage-token';

let topology: TestSentinels;
let stack: Stack;
beforeAll(async () => {
  topology = await startSentinels();
  stack = await startStack({
    REDIS_SENTINELS: topology.sentinels,
    REDIS_SENTINEL_NAME: PRIMARY_NAME,
    USAGE_API_TOKEN: API,
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  topology?.stop();
});

async function oneSession(): Promise<void> {
  const c = await stack.connect('transcribe');
  await configured(c, englishConfiguration('transcribe', 'audio/webm;codecs=opus'));
  c.sendJson({ type: 'end' });
  assert.equal((await c.closed).code, 1000);
}

/** `command` on the data node on `port`, on a connection of its own. */
async function onNode<T>(port: number, command: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await r.connect();
  try {
    return await command(r);
  } finally {
    r.disconnect();
  }
}

const role = async (port: number) => ((await onNode(port, (r) => r.role())) as string[])[0];

it('SENTINEL FAILOVER: the next session is written to the promoted replica', async () => {
  await oneSession();
  assert.equal((await endedLedgerSessions(stack, API, { count: 1 })).length, 1);
  await topology.failover();
  // No wait for the old primary's demotion (seconds later; it takes writes until then, lost after): the
  // gateway must move when the sentinels announce the switch. A moment for it to reconnect.
  await until(() => topology.switchedTo(topology.replicaPort), 'the sentinels switched', {
    withinMs: 30_000,
    everyMs: 100,
  });
  await delay(300);
  assert.equal(await role(topology.primaryPort), 'master', 'the old primary not demoted yet (the case this checks)');
  const port = stack.gateway.server.adminPort;
  await until(async () => (await metric(port, 'speech_gateway_redis_up')) === 1, 'redis up');
  await oneSession();
  const rows = await endedLedgerSessions(stack, API, { count: 2 });
  assert.equal(rows.length, 2, 'both sessions in the ledger');
  const keys = await onNode(topology.replicaPort, (r) => r.keys('sg:usage:s:*'));
  for (const r of rows) assert.ok(keys.includes(`sg:usage:s:${r.sessionKey}`), `${r.sessionKey} on the new primary`);
});
