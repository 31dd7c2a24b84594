// Redis behind Sentinel where every node and sentinel speaks only TLS (sentinel.ts with a CA and a
// certificate for 127.0.0.1 made with the openssl CLI at test time), data nodes and sentinels with
// passwords of their own:
// the gateway (a child process: it reads NODE_EXTRA_CA_CERTS only at start) with REDIS_SENTINELS,
// REDIS_SENTINEL_TLS=true and the passwords finds the primary over TLS and writes a session's ledger
// row there, which the usage API reads back. Without REDIS_SENTINEL_TLS, Redis stays down with the
// reason in the log. No output of the gateway holds a password.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { endedSessions, oneSession, startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { makeCertificates } from '../support/tls-certs.js';
import { PRIMARY_NAME, startSentinels, type TestSentinels } from './sentinel.js';

const API_TOKEN = 'redis-sentinel-tls-usage-token';
const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const SENTINEL_PASSWORD = `spw-${randomBytes(12).toString('hex')}`;

let dir = '';
let topology: TestSentinels | undefined;
let gateway: GatewayProcess | undefined;

async function startGateway(env: Record<string, string>): Promise<GatewayProcess> {
  gateway = await startGatewayProcess(dir, {
    USAGE_API_TOKEN: API_TOKEN,
    REDIS_SENTINELS: topology!.sentinels,
    REDIS_SENTINEL_NAME: PRIMARY_NAME,
    REDIS_PASSWORD: PASSWORD,
    REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
    ...env,
  });
  return gateway;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sg-sentinel-tls-'));
  const tls = makeCertificates(dir);
  topology = await startSentinels({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD }, tls);
}, 90_000);

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
}, 15_000);

afterAll(() => {
  topology?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('Redis behind Sentinel over TLS', () => {
  it('finds the primary over TLS: a session reaches the ledger and the usage API reads it back', async () => {
    const g = await startGateway({ REDIS_SENTINEL_TLS: 'true' });
    await oneSession(g);
    const [row] = await endedSessions(g, API_TOKEN);
    assert.equal(row.tenant, 'base');
    assert.doesNotMatch(g.output(), /redis not reachable at start/);
    for (const p of [PASSWORD, SENTINEL_PASSWORD]) assert.ok(!g.output().includes(p), 'no password in the output');
  });

  it('without REDIS_SENTINEL_TLS: Redis stays down with the reason in the log', async () => {
    const g = await startGateway({});
    assert.match(g.output(), /redis not reachable at start/);
    for (const p of [PASSWORD, SENTINEL_PASSWORD]) assert.ok(!g.output().includes(p), 'no password in the output');
  });
});
