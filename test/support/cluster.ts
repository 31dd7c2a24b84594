// Test support: N gateway processes (real `node src/main.ts`, as in production) on fixed loopback
// ports (client and admin), sharing one real redis-server and one emulator, each replica startable, killable (SIGKILL,
// a crash) and stoppable (SIGTERM, a drain) on its own, and started again on the same port, as a
// Kubernetes rolling update replaces pods behind one Service.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { startRedis, type TestRedis } from '../usage/redis.js';
import { freePort } from './ports.js';
import { openConfigured, resumeUrl, type TestClient } from './stack.js';
import { finals } from './transcripts.js';
import { delay } from './wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** Output kept per process (its last bytes), for failure messages. */
const OUTPUT_LIMIT = 256 * 1024;

export interface Replica {
  readonly index: number;
  readonly port: number;
  /** ADMIN_PORT: /metrics, /v1/*, the internal hop */
  readonly adminPort: number;
  /** REPLICA_ID of the running (or last) process: a new one per start, as a new pod gets a new name. */
  id: string;
  child: ChildProcess | null;
  /** The running (or last) process's stdout and stderr, the last OUTPUT_LIMIT bytes. */
  output(): string;
}

export interface Cluster {
  redis: TestRedis;
  emulator: Emulator;
  replicas: Replica[];
  /** Starts replica i on its port; resolves once /readyz answers 200. A new REPLICA_ID (a new pod),
   * or with `sameId` the last one (the kubelet restarting a crashed container in its pod). */
  start(i: number, o?: { sameId?: boolean }): Promise<void>;
  /** SIGKILL (a crash): resolves at its exit. */
  kill(i: number): Promise<void>;
  /** SIGTERM (a drain): resolves with its exit code. */
  stop(i: number): Promise<number | null>;
  /** Every replica running and ready again: one left stopped, or still draining, by a test that failed
   *  half-way is SIGKILLed if need be and started (so one failure does not fail the tests after it). */
  allUp(): Promise<void>;
  close(): Promise<void>;
}

/** `env` is added to every replica's environment (REDIS_URL, unless `env` names sentinels or cluster
 * nodes, UPSTREAM_URL and AUTH_URL are set here), then `own(i)` to replica i's. */
export async function startCluster(
  n: number,
  env: Record<string, string> = {},
  own: (i: number) => Record<string, string> = () => ({}),
): Promise<Cluster> {
  const redis = await startRedis();
  const emulator = await startEmulator();
  const base = {
    UPSTREAM_URL: emulator.wsBase,
    AUTH_URL: emulator.authBase,
    // Given Sentinel or a Redis Cluster, the replicas use that instead of the single redis-server.
    ...(env.REDIS_SENTINELS || env.REDIS_CLUSTER_NODES ? {} : { REDIS_URL: redis.url }),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...env,
  };
  const replicas: Array<Replica & { out: string; starts: number }> = [];
  // Two ports a replica: one given twice (the first closed before the next is asked for) would clash.
  const taken = new Set<number>();
  const port = async (): Promise<number> => {
    let p = await freePort();
    while (taken.has(p)) p = await freePort();
    taken.add(p);
    return p;
  };
  for (let index = 0; index < n; index++) {
    const r = {
      index,
      port: await port(),
      adminPort: await port(),
      id: '',
      child: null,
      out: '',
      starts: 0,
      output: () => r.out,
    };
    replicas.push(r);
  }
  const exited = (c: ChildProcess) =>
    c.exitCode !== null || c.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((res) => c.once('exit', () => res()));

  async function start(i: number, o: { sameId?: boolean } = {}): Promise<void> {
    const r = replicas[i];
    if (r.child) throw new Error(`replica ${i} is running`);
    if (!o.sameId || !r.id) r.id = `replica-${i}-${++r.starts}`;
    r.out = '';
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: root,
      env: {
        ...process.env,
        ...base,
        ...own(i),
        PORT: String(r.port),
        ADMIN_PORT: String(r.adminPort),
        REPLICA_ID: r.id,
        USAGE_JOURNAL_DIR: mkdtempSync(join(tmpdir(), 'sgw-j-')),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    r.child = child;
    const keep = (c: Buffer) => (r.out = (r.out + c.toString()).slice(-OUTPUT_LIMIT));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => r.child === child && (r.child = null));
    for (let t = 0; t < 600; t++) {
      if (child.exitCode !== null) break;
      const ready = await fetch(`http://127.0.0.1:${r.port}/readyz`).then(
        (res) => res.status === 200,
        () => false,
      );
      if (ready) return;
      await delay(50);
    }
    throw new Error(`replica ${i} did not become ready:\n${r.out.slice(-4000)}`);
  }

  async function signal(i: number, sig: NodeJS.Signals): Promise<number | null> {
    const child = replicas[i].child;
    if (!child) throw new Error(`replica ${i} is not running`);
    const done = exited(child);
    child.kill(sig);
    await done;
    return child.exitCode;
  }

  await Promise.all(replicas.map((_, i) => start(i)));
  return {
    redis,
    emulator,
    replicas,
    start,
    kill: async (i) => void (await signal(i, 'SIGKILL')),
    stop: (i) => signal(i, 'SIGTERM'),
    async allUp() {
      await Promise.all(
        replicas.map(async (r, i) => {
          if (
            r.child &&
            (await fetch(`http://127.0.0.1:${r.port}/readyz`).then(
              (res) => res.status === 200,
              () => false,
            ))
          )
            return;
          if (r.child) await signal(i, 'SIGKILL');
          await start(i);
        }),
      );
    },
    async close() {
      await Promise.all(replicas.map((r) => r.child && signal(r.index, 'SIGKILL')));
      await emulator.close();
      await redis.stop();
    },
  };
}

/** resumeUrl() on replica i of `cluster`, with a token of `tenant` issued now. */
export async function replicaUrl(cluster: Cluster, i: number, tenant: string, key: string): Promise<string> {
  const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
  return resumeUrl(`ws://127.0.0.1:${cluster.replicas[i].port}`, tenant, key, token);
}

/** A resumed client goes on from the `audioBytes` it was given: the rest of its stream, 5000 bytes every 100 ms. */
export async function resendFrom(client: TestClient, stream: Buffer, audioBytes: number): Promise<void> {
  const rest = stream.subarray(audioBytes);
  for (let at = 0; at < rest.length; at += 5000) {
    client.send(rest.subarray(at, at + 5000));
    await delay(100);
  }
}

/** A session on replica `i` whose client has sent `pieces`, had a final (so the session's record is
 * written) and dropped (no close frame) in a quiet moment: a final on its way when the connection
 * dies is lost with it (as for any client whose network drops; it resumes from audioBytes), and the
 * tests that use this count every final. */
export async function droppedSession(
  cluster: Cluster,
  i: number,
  key: string,
  tenant: string,
  pieces: Buffer[],
  configuration: object,
): Promise<{ first: TestClient; sessionId: unknown }> {
  const { client: first, accepted } = await openConfigured(await replicaUrl(cluster, i, tenant, key), configuration);
  pieces.forEach((c) => first.send(c));
  for (let t = 0; finals(first.messages).length === 0; t++) {
    if (t === 100) throw new Error(`no final within 10 s: ${JSON.stringify(first.types())}`);
    await delay(100);
  }
  for (let seen = -1, t = 0; seen !== first.messages.length; t++) {
    if (t === 20) throw new Error(`the session never went quiet: ${JSON.stringify(first.types())}`);
    seen = first.messages.length;
    await delay(1000);
  }
  first.ws.terminate();
  await delay(300);
  return { first, sessionId: accepted.sessionId };
}

/** Opens and configures a client as the vendor SDK would: reconnecting while the gateway says "not
 * now" (409 or 503: a session moving, a record being written again), at most `tries` times. */
export async function openWhenReady(
  url: () => Promise<string>,
  configuration: object,
  tries = 30,
): Promise<{ client: TestClient; accepted: Record<string, any> }> {
  for (let t = 0; ; t++) {
    try {
      return await openConfigured(await url(), configuration);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (t === tries || (status !== 409 && status !== 503)) throw err;
      await delay(500);
    }
  }
}
