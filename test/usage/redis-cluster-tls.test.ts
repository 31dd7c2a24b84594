// The gateway against a real Redis Cluster that speaks only TLS and requires AUTH, as managed services
// do: a CA and a node certificate for 127.0.0.1 made with the openssl CLI at test time, the gateway a
// child process (it reads NODE_EXTRA_CA_CERTS only at start) with REDIS_CLUSTER_NODES,
// REDIS_CLUSTER_TLS=true and REDIS_PASSWORD, and the embedded emulator. One session's ledger row
// reaches the cluster and the usage API reads it back; a wrong password leaves Redis down with the
// reason in the log. No output of the gateway ever holds a password.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { openClient } from '../support/stack.js';
import { ledgerSessionsAt, type LedgerSession } from '../support/usage-api.js';
import { startCluster, type TestCluster } from './redis-cluster.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const API_TOKEN = 'redis-cluster-tls-usage-token';
const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const WRONG_PASSWORD = `wrong-${randomBytes(12).toString('hex')}`;

let dir = '';
let cluster: TestCluster | undefined;
let gateway: ChildProcess | null = null;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

interface Gateway {
  port: number;
  adminPort: number;
  authBase: string;
  output(): string;
}

/** The gateway as a child process with `env` on top of the cluster's settings. */
async function startGateway(env: Record<string, string>): Promise<Gateway> {
  const base = { ...process.env };
  for (const name of ['REDIS_URL', 'REDIS_SENTINELS', 'NODE_EXTRA_CA_CERTS']) delete base[name];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...base,
      ...{ PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0', LOG_LEVEL: 'info' },
      USAGE_API_TOKEN: API_TOKEN,
      USAGE_JOURNAL_DIR: mkdtempSync(join(dir, 'journal-')),
      REDIS_CLUSTER_NODES: cluster!.clusterNodesEnv,
      REDIS_CLUSTER_TLS: 'true',
      NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
      ...env,
    },
  });
  gateway = child;
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b));
  child.stderr!.on('data', (b: Buffer) => (out += b));
  const g = { port: 0, adminPort: 0, authBase: '', output: () => out };
  for (let i = 0; i < 400 && !(g.port && g.authBase); i++) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}):\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
    const ports = /listening on :(\d+) \(admin: [^)]* on :(\d+)\)/.exec(out);
    g.port = Number(ports?.[1] ?? 0);
    g.adminPort = Number(ports?.[2] ?? 0);
    g.authBase = /EMULATOR on (http:\/\/[\d.:]+)/.exec(out)?.[1] ?? '';
  }
  if (!g.port || !g.authBase) throw new Error(`the gateway did not come up:\n${out}`);
  return g;
}

async function stopGateway(): Promise<void> {
  const child = gateway;
  gateway = null;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/** One session of tenant "base" through the gateway: token from the emulator, config, end. */
async function oneSession(g: Gateway): Promise<void> {
  const res = await fetch(`${g.authBase}/realms/base/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
      scope: 'openid transcribe',
    }),
  });
  const token = ((await res.json()) as { access_token: string }).access_token;
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const c = await openClient(`ws://127.0.0.1:${g.port}/audio-bridge/v2/transcribe?${q}`);
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
  await c.next('CONFIG_ACCEPTED');
  c.sendJson({ type: 'end' });
  assert.equal((await c.closed).code, 1000);
}

async function endedSessions(g: Gateway): Promise<LedgerSession[]> {
  let last: unknown = null;
  for (let i = 0; i < 100; i++) {
    try {
      const rows = (await ledgerSessionsAt(g.adminPort, API_TOKEN, 'base')).filter((r) => r.end !== null);
      if (rows.length > 0) return rows;
      last = 'no ended session';
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the usage API shows no ended session: ${String(last)}\n${g.output()}`);
}

function assertNoSecret(g: Gateway): void {
  for (const s of [PASSWORD, WRONG_PASSWORD])
    assert.ok(!g.output().includes(s), `a password is in the gateway's output:\n${g.output()}`);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sg-cluster-tls-'));
  openssl(
    ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-keyout', 'ca.key', '-out', 'ca.crt'],
    ...['-subj', '/CN=speech-gateway test ca'],
  );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'node.key', '-out', 'node.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'node.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(
    ...['x509', '-req', '-in', 'node.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'],
    ...['-days', '1', '-extfile', 'node.ext', '-out', 'node.crt'],
  );
  const tls = { cert: join(dir, 'node.crt'), key: join(dir, 'node.key'), ca: join(dir, 'ca.crt') };
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
    const [row] = await endedSessions(g);
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
