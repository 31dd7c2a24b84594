// Test helper: a Redis Cluster from real parts: six redis-server (cluster-enabled, on loopback, no
// persistence) joined by `redis-cli --cluster create` as three primaries with one replica each, a
// node called failing after 2 s. Ready once every node says cluster_state:ok and every replica is in
// sync with its primary. With `tls`, the nodes speak TLS only (clients, bus and replication); with
// `password`, every node requires it (and the replicas use it with their primaries).
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../support/ports.js';
import { until } from '../support/wait.js';
import { afterAll, beforeAll } from 'vitest';
import { launchRedisServer, startRedis, type TestRedis } from './redis.js';

export interface TestCluster {
  ports: number[];
  /** every node, primaries and replicas, as the client settings take them */
  nodes: { host: string; port: number }[];
  /** REDIS_CLUSTER_NODES */
  clusterNodesEnv: string;
  /** The port of the primary serving `key`'s slot now. */
  primaryOf(key: string): Promise<number>;
  /** Moves `key`'s slot (it must hold no key) to another primary, as a resharding does, without telling
   * any client; resolves with the new owner's port once every live node agrees. */
  moveSlot(key: string): Promise<number>;
  /** SIGKILL the node on `port`: no shutdown, no last write. */
  kill(port: number): void;
  /** Whether every live node agrees the cluster is ok. */
  ok(): Promise<boolean>;
  stop(): void;
}

export interface ClusterSecurity {
  /** PEM files: the nodes' certificate and key, and the CA that signed it */
  tls?: { cert: string; key: string; ca: string };
  password?: string;
}

const run = promisify(execFile);
let security: ClusterSecurity = {};

/** One command to a node on a short-lived connection. */
export async function onNode<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    password: security.password,
    ...(security.tls ? { tls: { ca: readFileSync(security.tls.ca) } } : {}),
  });
  try {
    await r.connect();
    return await f(r);
  } finally {
    r.disconnect();
  }
}

function securityArgs(port: number, s: ClusterSecurity): string[] {
  const tls = s.tls
    ? [
        ...['--port', '0', '--tls-port', String(port), '--tls-cluster', 'yes', '--tls-replication', 'yes'],
        ...['--tls-cert-file', s.tls.cert, '--tls-key-file', s.tls.key, '--tls-ca-cert-file', s.tls.ca],
        ...['--tls-auth-clients', 'no'],
      ]
    : ['--port', String(port)];
  return [...tls, ...(s.password ? ['--requirepass', s.password, '--masterauth', s.password] : [])];
}

/** One cluster at a time per test file when `secure` is given (onNode uses its settings). */
export async function startCluster(secure: ClusterSecurity = {}): Promise<TestCluster> {
  security = secure;
  const dir = mkdtempSync(join(tmpdir(), 'sg-cluster-'));
  const children = new Map<number, ChildProcess>();
  const stop = () => {
    for (const c of children.values()) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  const ports = await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()));
  await Promise.all(
    ports.map(async (port) => {
      const args = [
        ...securityArgs(port, secure),
        ...['--bind', '127.0.0.1', '--dir', dir],
        ...['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`)],
        ...['--cluster-node-timeout', '2000', '--appendonly', 'no', '--save', ''],
        // A replica may take over however long ago it last heard from its primary (an idle test cluster).
        ...['--cluster-replica-validity-factor', '0'],
      ];
      children.set(port, await launchRedisServer(args));
    }),
  );
  await run('redis-cli', [
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '1',
    '--cluster-yes',
    ...(secure.tls ? ['--tls', '--cacert', secure.tls.ca] : []),
    ...(secure.password ? ['-a', secure.password, '--no-auth-warning'] : []),
  ]);
  const live = () => ports.filter((p) => children.get(p)?.exitCode === null && !children.get(p)?.killed);
  const stateOk = (port: number) =>
    onNode(port, (r) => r.cluster('INFO')).then(
      (info) => /cluster_state:ok/.test(String(info)),
      () => false,
    );
  const ok = async () => (await Promise.all(live().map(stateOk))).every(Boolean);
  await until(ok, 'the cluster to be ok', { withinMs: 30_000 });
  // Writes before a kill must be on the replica that takes over: every replica in sync first.
  const synced = (port: number) =>
    onNode(port, (r) => r.info('replication')).then(
      (info) => /role:master/.test(info) || /master_link_status:up/.test(info),
      () => false,
    );
  await until(async () => (await Promise.all(ports.map(synced))).every(Boolean), 'the replicas to sync', {
    withinMs: 30_000,
  });
  const cluster: TestCluster = {
    ports,
    nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
    clusterNodesEnv: ports
      .slice(0, 3)
      .map((p) => `127.0.0.1:${p}`)
      .join(','),
    async primaryOf(key) {
      for (const port of live()) {
        const owner = await slotOwner(port, await onNode(port, (r) => r.cluster('KEYSLOT', key)));
        if (owner !== undefined) return owner;
      }
      throw new Error('no live node answers');
    },
    moveSlot: async (key) => moveSlot(live(), await cluster.primaryOf(key), key),
    kill(port) {
      children.get(port)?.kill('SIGKILL');
    },
    ok,
    stop,
  };
  return cluster;
}

/** See TestCluster.moveSlot: `key`'s slot from the primary `from` to another of the `live` nodes. */
async function moveSlot(live: number[], from: number, key: string): Promise<number> {
  const slot = await onNode(from, (r) => r.cluster('KEYSLOT', key));
  const roles = await Promise.all(live.map(async (p) => [p, await onNode(p, (r) => r.role())] as const));
  const primaries = roles.filter(([, role]) => role[0] === 'master').map(([p]) => p);
  const to = primaries.find((p) => p !== from)!;
  const id = (port: number) => onNode(port, (r) => r.cluster('MYID'));
  const [fromId, toId] = [await id(from), await id(to)];
  // The order redis-cli's resharding uses; the importing node's NODE step bumps its epoch, so every
  // node, replicas included, takes its claim.
  await onNode(to, (r) => r.cluster('SETSLOT', slot, 'IMPORTING', fromId));
  await onNode(from, (r) => r.cluster('SETSLOT', slot, 'MIGRATING', toId));
  for (const p of [to, from, ...primaries.filter((p) => p !== to && p !== from)])
    await onNode(p, (r) => r.cluster('SETSLOT', slot, 'NODE', toId));
  const owner = (port: number) => slotOwner(port, slot).catch(() => undefined);
  await until(async () => (await Promise.all(live.map(owner))).every((p) => p === to), 'the slot moved', {
    withinMs: 10_000,
  });
  return to;
}

/** The port of the primary that the node on `port` says serves `slot` (undefined: no range holds it). */
async function slotOwner(port: number, slot: number): Promise<number | undefined> {
  const slots = await onNode(port, (r) => r.cluster('SLOTS'));
  const hit = slots.find(([from, to]) => slot >= from && slot <= to);
  return hit ? Number(hit[2][1]) : undefined;
}

/** A real redis-server and a real Redis Cluster for a whole test file: started before its tests,
 *  stopped after them; read their addresses from the returned object once the tests run. */
export function redisAndClusterForFile(): { redis: TestRedis; cluster: TestCluster } {
  const both = {} as { redis: TestRedis; cluster: TestCluster };
  beforeAll(async () => {
    [both.redis, both.cluster] = await Promise.all([startRedis(), startCluster()]);
  }, 60_000);
  afterAll(async () => {
    both.cluster?.stop();
    await both.redis?.stop();
  });
  return both;
}
