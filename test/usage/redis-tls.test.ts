// The gateway against a real redis-server that speaks only TLS and requires AUTH: a CA and a server
// certificate for localhost made with the openssl CLI at test time, the gateway a child process (it
// reads NODE_EXTRA_CA_CERTS only at start) with REDIS_URL=rediss://... and the embedded emulator.
// One session's ledger row, its audit event and the replica's heartbeat reach Redis (the usage, audit
// and cluster clients all went through TLS and AUTH); a wrong password, a plaintext redis:// URL to the
// TLS port, and a certificate the gateway has no CA for each leave Redis down with the reason in the
// log. No output of the gateway ever holds a password.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { freePort } from '../support/ports.js';
import { metric } from '../support/metrics.js';
import { endedSessions, oneSession, startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { makeCertificates } from '../support/tls-certs.js';
import { ledgerSessionsAt } from '../support/usage-api.js';
import { launchRedisServer } from './redis.js';
import { delay } from '../support/wait.js';

const API_TOKEN = 'redis-tls-usage-token';
// Distinct, random passwords: any of them in the gateway's output is a leak.
const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const USER_PASSWORD = `upw-${randomBytes(12).toString('hex')}`;
const WRONG_PASSWORD = `wrong-${randomBytes(12).toString('hex')}`;
const SECRETS = [PASSWORD, USER_PASSWORD, WRONG_PASSWORD];

let dir = '';
let caFile = '';
let otherCaFile = '';
let redisPort = 0;
let redis: ChildProcess | null = null;

let gateway: GatewayProcess | undefined;

/** The gateway as a child process with `env` (REDIS_URL, NODE_EXTRA_CA_CERTS are only what `env` says). */
async function startGateway(env: Record<string, string>): Promise<GatewayProcess> {
  gateway = await startGatewayProcess(dir, { USAGE_API_TOKEN: API_TOKEN, ...env });
  return gateway;
}

async function stopGateway(): Promise<void> {
  await gateway?.stop();
  gateway = undefined;
}

function assertNoSecret(g: GatewayProcess): void {
  for (const s of SECRETS) assert.ok(!g.output().includes(s), `a password is in the gateway's output:\n${g.output()}`);
}

/** A command to the test's Redis, from a client of its own over TLS as the default user. */
async function command(name: string, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    host: 'localhost',
    port: redisPort,
    password: PASSWORD,
    tls: { ca: readFileSync(caFile) },
    lazyConnect: true,
    maxRetriesPerRequest: 0,
  });
  try {
    await client.connect();
    return await client.call(name, ...args);
  } finally {
    client.disconnect();
  }
}
const keys = async (pattern: string) => (await command('KEYS', pattern)) as string[];

/** What the gateway said about Redis not answering at start (usage, cluster and audit warn alike). */
function notReachable(g: GatewayProcess): string[] {
  return g
    .output()
    .split('\n')
    .filter((l) => l.includes('redis not reachable at start'));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sg-redis-tls-'));
  // The CA the gateway is given, a server certificate it signed for localhost and 127.0.0.1, and an
  // unrelated CA (the wrong one).
  const certs = makeCertificates(dir, ['other-ca']);
  caFile = certs.ca;
  otherCaFile = certs.others['other-ca'];

  // TLS only (no plaintext port), AUTH for the default user and an ACL user "ledger".
  const argsFor = (port: number) => [
    '--port',
    '0',
    '--tls-port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--tls-cert-file',
    certs.cert,
    '--tls-key-file',
    certs.key,
    '--tls-ca-cert-file',
    caFile,
    '--tls-auth-clients',
    'no',
    '--requirepass',
    PASSWORD,
    '--user',
    'ledger',
    'on',
    `>${USER_PASSWORD}`,
    '~*',
    '&*',
    '+@all',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
  ];
  for (let attempt = 1; !redis; attempt++) {
    redisPort = await freePort();
    redis = await launchRedisServer(argsFor(redisPort)).catch((err: Error) => {
      if (attempt < 5 && /Address already in use/.test(err.message)) return null;
      throw err;
    });
  }
}, 60_000);

afterEach(stopGateway, 15_000);

afterAll(() => {
  redis?.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('Redis over TLS with AUTH', () => {
  it('rediss:// with the password and the CA: the ledger row, the audit event and the heartbeat are in Redis; redis_up is 1', async () => {
    const g = await startGateway({
      REDIS_URL: `rediss://:${PASSWORD}@localhost:${redisPort}`,
      NODE_EXTRA_CA_CERTS: caFile,
    });
    assert.deepEqual(notReachable(g), [], 'every Redis client connected at start');
    assert.equal(await metric(g.adminPort, 'speech_gateway_redis_up'), 1);
    await oneSession(g);
    const rows = await endedSessions(g, API_TOKEN);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].tenant, 'base');
    assert.equal(rows[0].outcome, 'ended');
    // Each of the gateway's three clients wrote through TLS and AUTH: usage, audit, cluster.
    assert.ok((await keys('sg:usage:*')).length > 0, 'usage ledger keys');
    assert.ok((await keys('sg:audit:base')).length === 1, 'the audit event of the session');
    assert.ok((await keys('sgw:replica:*')).length > 0, "the replica's heartbeat");
    assertNoSecret(g);
  }, 60_000);

  it('rediss:// with an ACL user and its password: the gateway connects as that user, the session is in the ledger', async () => {
    const g = await startGateway({
      REDIS_URL: `rediss://ledger:${USER_PASSWORD}@localhost:${redisPort}/0`,
      NODE_EXTRA_CA_CERTS: caFile,
    });
    assert.deepEqual(notReachable(g), [], 'every Redis client connected at start');
    assert.equal(await metric(g.adminPort, 'speech_gateway_redis_up'), 1);
    // The usage, audit and cluster clients: three connections authenticated as "ledger".
    const clients = String(await command('CLIENT', 'LIST'));
    assert.equal(clients.split('\n').filter((l) => / user=ledger /.test(l)).length, 3, clients);
    const ended = async () =>
      (await ledgerSessionsAt(g.adminPort, API_TOKEN, 'base')).filter((r) => r.end !== null).length;
    const before = await ended();
    await oneSession(g);
    for (let i = 0; i < 100 && (await ended()) === before; i++) await delay(100);
    assert.equal(await ended(), before + 1);
    assertNoSecret(g);
  }, 60_000);

  it('a wrong password: the gateway starts with Redis down, says WRONGPASS, and never prints the password', async () => {
    const g = await startGateway({
      REDIS_URL: `rediss://:${WRONG_PASSWORD}@localhost:${redisPort}`,
      NODE_EXTRA_CA_CERTS: caFile,
    });
    // The usage, audit and cluster clients each say so, with Redis's reason.
    const said = notReachable(g);
    assert.equal(said.length, 3, g.output());
    assert.ok(
      said.every((l) => /WRONGPASS/.test(l)),
      `the reason is named:\n${said.join('\n')}`,
    );
    await delay(1000);
    assert.equal(await metric(g.adminPort, 'speech_gateway_redis_up'), 0);
    assertNoSecret(g);
  }, 60_000);

  it('a plaintext redis:// URL to the TLS port: Redis stays down', async () => {
    const g = await startGateway({
      REDIS_URL: `redis://:${PASSWORD}@localhost:${redisPort}`,
      NODE_EXTRA_CA_CERTS: caFile,
    });
    // Redis drops the connection at the first bytes that are no TLS handshake.
    const said = notReachable(g);
    assert.equal(said.length, 3, g.output());
    assert.ok(
      said.every((l) => /ECONNRESET|EPIPE|Connection is closed/.test(l)),
      `the reason is named:\n${said.join('\n')}`,
    );
    await delay(1000);
    assert.equal(await metric(g.adminPort, 'speech_gateway_redis_up'), 0);
    assertNoSecret(g);
  }, 60_000);

  for (const [name, ca] of [
    ['without NODE_EXTRA_CA_CERTS', () => ({})],
    ['with NODE_EXTRA_CA_CERTS naming a CA that did not sign it', () => ({ NODE_EXTRA_CA_CERTS: otherCaFile })],
  ] as const) {
    it(`the server's certificate ${name}: refused, Redis stays down, the reason in the log`, async () => {
      const g = await startGateway({ REDIS_URL: `rediss://:${PASSWORD}@localhost:${redisPort}`, ...ca() });
      const said = notReachable(g);
      assert.equal(said.length, 3, g.output());
      assert.ok(
        said.every((l) => /certificate|issuer/i.test(l)),
        `the reason is named:\n${said.join('\n')}`,
      );
      await delay(1000);
      assert.equal(await metric(g.adminPort, 'speech_gateway_redis_up'), 0);
      assertNoSecret(g);
    }, 60_000);
  }
});
