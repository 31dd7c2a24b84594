// Test helper: Redis behind Sentinel from real parts: a primary redis-server, one replica of it
// (--replicaof) and three sentinels (redis-server --sentinel, each with a writable conf file of its
// own: sentinels rewrite it) that monitor the primary with a quorum of 2 and call it down after 1 s.
// With `auth`, the data nodes require one password and the sentinels another; with `tls`, every node
// and sentinel speaks TLS only.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../support/ports.js';
import { until } from '../support/wait.js';
import { launchRedisServer } from './redis.js';

export const PRIMARY_NAME = 'sg-primary';

export interface TestSentinels {
  /** REDIS_SENTINELS */
  sentinels: string;
  primaryPort: number;
  replicaPort: number;
  /** SIGKILL the primary: no shutdown, no last write. */
  killPrimary(): void;
  /** SENTINEL FAILOVER: the replica promoted, the primary (alive) demoted to its replica. */
  failover(): Promise<void>;
  /** Whether every sentinel has switched to the primary on `port` (announced +switch-master). */
  switchedTo(port: number): Promise<boolean>;
  /** The port the sentinels name as the primary now. */
  primaryPortNow(): Promise<number>;
  stop(): void;
}

export interface SentinelAuth {
  /** the data nodes' requirepass (and the replica's masterauth) */
  password: string;
  /** the sentinels' requirepass */
  sentinelPassword: string;
}

/** With TLS, every node speaks TLS only: to clients, to its replica and to the sentinels. */
export interface SentinelTls {
  cert: string;
  key: string;
  ca: string;
}

const tlsFiles = (t: SentinelTls) => ['tls-cert-file', t.cert, 'tls-key-file', t.key, 'tls-ca-cert-file', t.ca];

const dataNode = (
  dir: string,
  port: number,
  auth: SentinelAuth | undefined,
  tls: SentinelTls | undefined,
  ...extra: string[]
) => [
  ...(tls
    ? [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--tls-replication',
        'yes',
        '--tls-auth-clients',
        'no',
        ...tlsFiles(tls).map((a, i) => (i % 2 ? a : `--${a}`)),
      ]
    : ['--port', String(port)]),
  ...['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
  ...(auth ? ['--requirepass', auth.password, '--masterauth', auth.password] : []),
  ...extra,
];

function sentinelConf(dir: string, port: number, primaryPort: number, auth?: SentinelAuth, tls?: SentinelTls): string {
  const file = join(dir, `sentinel-${port}.conf`);
  const files = tls ? tlsFiles(tls) : [];
  const conf = [
    ...(tls
      ? [
          'port 0',
          `tls-port ${port}`,
          'tls-replication yes',
          'tls-auth-clients no',
          ...files.flatMap((a, i) => (i % 2 ? [] : [`${a} ${files[i + 1]}`])),
        ]
      : [`port ${port}`]),
    'bind 127.0.0.1',
    `dir ${dir}`,
    `sentinel monitor ${PRIMARY_NAME} 127.0.0.1 ${primaryPort} 2`,
    `sentinel down-after-milliseconds ${PRIMARY_NAME} 1000`,
    `sentinel failover-timeout ${PRIMARY_NAME} 5000`,
    ...(auth ? [`sentinel auth-pass ${PRIMARY_NAME} ${auth.password}`, `requirepass ${auth.sentinelPassword}`] : []),
  ];
  writeFileSync(file, conf.join('\n') + '\n');
  return file;
}

/** One command to a sentinel on its own short-lived connection. */
async function askSentinel(
  port: number,
  password: string | undefined,
  tls: SentinelTls | undefined,
  ...args: string[]
): Promise<unknown> {
  const r = new Redis({
    port,
    host: '127.0.0.1',
    password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    ...(tls ? { tls: { ca: readFileSync(tls.ca) } } : {}),
  });
  try {
    await r.connect();
    return await r.call('SENTINEL', ...args);
  } finally {
    r.disconnect();
  }
}

/** The primary, its replica in sync, then three sentinels that know each other (quorum reachable). */
export async function startSentinels(auth?: SentinelAuth, tls?: SentinelTls): Promise<TestSentinels> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-sentinel-'));
  const [primaryPort, replicaPort, ...sentinelPorts] = await Promise.all([1, 2, 3, 4, 5].map(() => freePort()));
  const children: ChildProcess[] = [];
  const stop = () => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  const primary = await launchRedisServer(
    dataNode(mkdtempSync(join(dir, 'p-')), primaryPort, auth, tls),
    'Ready to accept connections',
  );
  children.push(primary);
  const replicaArgs = dataNode(
    mkdtempSync(join(dir, 'r-')),
    replicaPort,
    auth,
    tls,
    '--replicaof',
    '127.0.0.1',
    `${primaryPort}`,
  );
  children.push(await launchRedisServer(replicaArgs, 'MASTER <-> REPLICA sync: Finished with success'));
  for (const port of sentinelPorts) {
    children.push(
      await launchRedisServer([sentinelConf(dir, port, primaryPort, auth, tls), '--sentinel'], '+monitor master'),
    );
  }
  // CKQUORUM answers an error (NOQUORUM) until the sentinels have heard of each other.
  const ready = async (port: number) =>
    /^OK 3 usable/.test(
      String(await askSentinel(port, auth?.sentinelPassword, tls, 'CKQUORUM', PRIMARY_NAME).catch(String)),
    ) && ((await askSentinel(port, auth?.sentinelPassword, tls, 'REPLICAS', PRIMARY_NAME)) as unknown[]).length === 1;
  await until(async () => (await Promise.all(sentinelPorts.map(ready))).every(Boolean), 'the sentinels to know all');
  return {
    sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
    primaryPort,
    replicaPort,
    killPrimary: () => primary.kill('SIGKILL'),
    failover: async () =>
      void (await askSentinel(sentinelPorts[0], auth?.sentinelPassword, tls, 'FAILOVER', PRIMARY_NAME)),
    // SENTINEL MASTER shows the new address only after the switch (GET-MASTER-ADDR-BY-NAME already during it).
    async switchedTo(port) {
      const ask = (p: number) =>
        askSentinel(p, auth?.sentinelPassword, tls, 'MASTER', PRIMARY_NAME) as Promise<string[]>;
      const fields = await Promise.all(sentinelPorts.map(ask));
      return fields.every((f) => f[f.indexOf('port') + 1] === String(port));
    },
    async primaryPortNow() {
      const addr = (await askSentinel(
        sentinelPorts[0],
        auth?.sentinelPassword,
        tls,
        'GET-MASTER-ADDR-BY-NAME',
        PRIMARY_NAME,
      )) as string[];
      return Number(addr[1]);
    },
    stop,
  };
}
