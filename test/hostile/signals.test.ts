// `npm start` under a stop signal sent to its whole process group (systemd's default KillMode,
// `tini -g`, Ctrl-C): every streaming client, still streaming at DRAIN_SECONDS, gets its usage and
// end message and close 1012 (reconnect), the group exits 0, and Redis holds every session as ended
// and no tenant slot still taken.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { UsageHttpApi } from '../../src/usage/api.js';
import { RedisUsageStore, createRedisClient } from '../../src/usage/redis-store.js';
import { chromeChunks } from '../support/fixtures.js';
import { openClient, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { get, tempDir } from '../support/usage.js';
import { delay, until } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SESSIONS = 20;
const CHUNKS = chromeChunks('webm-opus');
const END_MESSAGE = { transcribe: 'ended', streams: 'ENDED' } as const;

interface Started {
  child: ChildProcess;
  port: number;
  authBase: string;
  output: () => string;
  exited: Promise<number | null>;
}

/** `npm start` as an operator runs it, in a process group of its own. */
async function npmStart(redisUrl: string): Promise<Started> {
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      EMULATOR_PORT: '0',
      REDIS_URL: redisUrl,
      USAGE_JOURNAL_DIR: tempDir(),
      DRAIN_SECONDS: '3',
      LOG_LEVEL: 'info',
      MAX_SESSIONS_PER_TENANT: String(SESSIONS),
      // one token opens them all at once, then configures them
      MAX_UNCONFIGURED_PER_TOKEN: String(SESSIONS),
      MAX_UNCONFIGURED_PER_SUBJECT: String(SESSIONS),
    },
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b));
  child.stderr!.on('data', (b: Buffer) => (out += b));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await until(() => /EMULATOR on \S+/.test(out) || child.exitCode !== null, 'the gateway to start');
  const port = /listening on http:\/\/localhost:(\d+)/.exec(out)?.[1];
  const authBase = /EMULATOR on (http:\/\/[\d.:]+)/.exec(out)?.[1];
  if (!port || !authBase) throw new Error(`npm start did not come up:\n${out}`);
  return { child, port: Number(port), authBase, output: () => out, exited };
}

async function devToken(authBase: string, scope: string): Promise<string> {
  const res = await fetch(`${authBase}/realms/base/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
      scope,
    }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

type Streaming = { endpoint: 'transcribe' | 'streams'; client: TestClient; done: Promise<void> };

/** A configured session streaming the Chromium WebM/Opus chunks at real time until it is closed. */
async function streamingSession(g: Started, endpoint: Streaming['endpoint'], token: string): Promise<Streaming> {
  const path = endpoint === 'transcribe' ? 'transcribe' : `interactions/${randomUUID()}/streams`;
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const client = await openClient(`ws://127.0.0.1:${g.port}/audio-bridge/v2/${path}?${q}`);
  const errors: string[] = [];
  client.ws.on('error', (e) => errors.push(e.message));
  const audioFormat = 'audio/webm;codecs=opus';
  client.sendJson(
    endpoint === 'transcribe'
      ? { type: 'config', configuration: { primaryLanguage: 'en', audioFormat } }
      : {
          type: 'config',
          configuration: {
            transcription: { primaryLanguage: 'en' },
            mode: { type: 'facts', outputLocale: 'en' },
            audioFormat,
          },
        },
  );
  await client.next('CONFIG_ACCEPTED').catch(async (err: Error) => {
    const { code, reason } = await client.closed;
    throw new Error(`${endpoint}: ${err.message} (closed ${code} ${reason}; client errors ${JSON.stringify(errors)})`);
  });
  const done = (async () => {
    for (const chunk of CHUNKS) {
      if (client.ws.readyState !== client.ws.OPEN) return;
      client.send(chunk);
      await delay(250);
    }
  })();
  return { endpoint, client, done };
}

async function openSessions(g: Started): Promise<Streaming[]> {
  const tokens = {
    transcribe: await devToken(g.authBase, 'openid transcribe'),
    streams: await devToken(g.authBase, 'openid streams'),
  };
  return Promise.all(
    Array.from({ length: SESSIONS }, (_, i) => {
      const endpoint = i % 2 ? 'streams' : 'transcribe';
      return streamingSession(g, endpoint, tokens[endpoint]);
    }),
  );
}

function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch {
    return true;
  }
}

describe('stop signals to the process group of npm start', () => {
  let redis: TestRedis;
  let usageApi: UsageHttpApi;
  let ledgerRedis: ReturnType<typeof createRedisClient>;
  const groups = new Set<number>();

  beforeAll(async () => {
    redis = await startRedis();
    ledgerRedis = createRedisClient({ url: redis.url });
    await ledgerRedis.connect();
    usageApi = new UsageHttpApi(new RedisUsageStore(ledgerRedis, 'sg:usage:', 86_400_000, Date.now), 'ops-token');
  });
  afterAll(async () => {
    for (const pgid of groups) if (!groupGone(pgid)) process.kill(-pgid, 'SIGKILL');
    ledgerRedis?.disconnect();
    await redis?.stop();
  });

  async function drainUnder(signals: NodeJS.Signals[]): Promise<void> {
    const from = new Date().toISOString();
    const g = await npmStart(redis.url);
    groups.add(g.child.pid!);
    try {
      await signalMidStream(g, signals);
    } catch (err) {
      await delay(1000); // what the gateway says next
      throw new Error(
        `${(err as Error).message}\ngateway exit ${g.child.exitCode ?? g.child.signalCode}, output:\n${g.output().slice(-4000)}`,
        { cause: err },
      );
    } finally {
      // A failed run must not leave its gateway, or the slots it held, to the next one.
      if (!groupGone(g.child.pid!)) {
        process.kill(-g.child.pid!, 'SIGKILL');
        await ledgerRedis.del('sg:usage:{t:base}:limit');
      }
    }
    const { status, body } = await get(usageApi, `/v1/usage/sessions?tenant=base&from=${from}`, 'ops-token');
    assert.equal(status, 200);
    assert.equal(body.sessions.length, SESSIONS);
    assert.deepEqual(
      body.sessions.filter((s: { end: string | null }) => s.end === null),
      [],
      'no session left open in the ledger',
    );
    assert.equal(await ledgerRedis.zcard('sg:usage:{t:base}:limit'), 0, 'no session slot left held');
  }

  async function signalMidStream(g: Started, signals: NodeJS.Signals[]): Promise<void> {
    const sessions = await openSessions(g);
    await delay(1000); // all of them mid-stream
    for (const s of signals) {
      process.kill(-g.child.pid!, s);
      await delay(100);
    }

    for (const { endpoint, client } of sessions) {
      const { code } = await client.closed;
      const types = client.types();
      const ended = types.indexOf(END_MESSAGE[endpoint]);
      assert.equal(code, 1012, `${endpoint} closed ${code}; got ${JSON.stringify(types)}`);
      assert.ok(
        ended > 0 && types.lastIndexOf('usage', ended) >= 0,
        `${endpoint}: usage then ${END_MESSAGE[endpoint]}; got ${JSON.stringify(types)}`,
      );
      const f = finals(client.messages);
      for (let k = 1; k < f.length; k++) {
        assert.ok(
          Math.abs(f[k].start - f[k - 1].end) < 1e-6,
          `${endpoint}: every final once, on one timeline (${f[k - 1].end} → ${f[k].start})`,
        );
      }
      assert.ok(f.length > 0 && f[0].start === 0, `${endpoint}: finals from the start`);
    }
    await Promise.all(sessions.map((s) => s.done));
    assert.equal(await g.exited, 0, `npm start exit code; output:\n${g.output().slice(-3000)}`);
    await until(() => groupGone(g.child.pid!), 'every process of the group to exit', { withinMs: 5000 });
    assert.equal(g.output().match(/"msg":"draining"/g)?.length, 1, 'one drain, however many signals');
  }

  for (let run = 1; run <= 10; run++) {
    it(`SIGTERM, run ${run} of 10: ${SESSIONS} streaming sessions end with usage and their end message, closed 1012`, () =>
      drainUnder(['SIGTERM']));
  }
  it('SIGINT (Ctrl-C) drains the same way', () => drainUnder(['SIGINT']));
  it('a second SIGTERM during the drain is logged, not a second drain or a kill', async () =>
    drainUnder(['SIGTERM', 'SIGTERM']));
});
