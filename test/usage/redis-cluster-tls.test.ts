// The gateway against a real Redis Cluster that speaks only TLS and requires AUTH, as managed services
// do: a CA and a node certificate for 127.0.0.1 made with the openssl CLI at test time, the gateway a
// child process (it reads NODE_EXTRA_CA_CERTS only at start) with REDIS_CLUSTER_NODES,
// REDIS_CLUSTER_TLS=true and REDIS_PASSWORD, and the embedded emulator. One session's ledger row
// reaches the cluster and the usage API reads it back; a wrong password leaves Redis down with the
// reason in the log. No output of the gateway ever holds a password.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { endedSessions, oneSession, startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { makeCertificates } from '../support/tls-certs.js';
import { startCluster, type TestCluster } from './redis-cluster.js';

const API_TOKEN = 'redis-cluster-tls-usage-token';
const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const WRONG_PASSWORD = `wrong-${randomBytes(12).toString('hex')}`;

let dir = '';
let cluster: TestCluster | undefined;
let gateway: GatewayProcess | undefined;

/** The gateway as a child process with `env` on top of the cluster's settings. */
async function startGateway(env: Record<string, string>): Promise<GatewayProcess> {
  gateway = await startGatewayProcess(dir, {
    USAGE_API_TOKEN: API_TOKEN,
    REDIS_CLUSTER_NODES: cluster!.clusterNodesEnv,
    REDIS_CLUSTER_TLS: 'true',
    NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
    ...env,
  });
  return gateway;
}

async function stopGateway(): Promise<void> {
  await gateway?.stop();
  gateway = undefined;
}

function assertNoSecret(g: GatewayProcess): void {
  for (const s of [PASSWORD, WRONG_PASSWORD])
    assert.ok(!g.output().includes(s), `a password is in the gateway's output:\n${g.output()}`);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sg-cluster-tls-'));
  const tls = makeCertificates(dir);
  cluster = await startCluster({ tls, password: PASSWORD });
}, 90_000);

afterEach(stopGateway, 15_000);

afterAll(() => {
  cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('Redis Cluster over TLS with AUTH', () => {
  it('a session reaches the ledger on the cluster and the usage API reads it back', async () => {
    const g = await startGateway({ REDIS_PASSWORD: PASSWORD });
    await oneSession(g);
    const [row] = await endedSessions(g, API_TOKEN);
    assert.equal(row.tenant, 'base');
    assert.doesNotMatch(g.output(), /redis not reachable at start/);
    assertNoSecret(g);
  });

  it('a wrong password: Redis stays down with the reason in the log, never the password', async () => {
    const g = await startGateway({ REDIS_PASSWORD: WRONG_PASSWORD });
    assert.match(g.output(), /redis not reachable at start/);
    assert.match(g.output(), /Failed to refresh slots cache\. \(WRONGPASS/);
    assertNoSecret(g);
  });
});
