// Usage credits across replicas, with real processes: two gateway processes share one real
// redis-server and one emulator. Sessions run on both; Redis is stopped and restarted mid-run; one
// gateway gets SIGTERM while a session is running. The ops API must then report, to the credit,
// what the upstream reported; the tenant cap must hold across both; /metrics must show every series.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { upstreamCredits } from '../support/emulator.js';
import { chromeChunks } from '../support/fixtures.js';
import { openClient, refusal, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const chunks = chromeChunks('webm-opus');
const API_TOKEN = 'ops-test-token';

interface GatewayProcess {
  child: ChildProcess;
  port: number;
  adminPort: number;
  output: () => string;
}

async function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: {
      ...process.env,
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
      USAGE_JOURNAL_DIR: mkdtempSync(join(tmpdir(), 'sgw-j-')),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  child.stderr!.on('data', (c: Buffer) => (out += c));
  for (let i = 0; i < 400; i++) {
    const m = out.match(/"port":(\d+),"adminPort":(\d+)[^\n]*listening/);
    if (m) return { child, port: Number(m[1]), adminPort: Number(m[2]), output: () => out };
    if (child.exitCode !== null) break;
    await delay(50);
  }
  throw new Error(`gateway did not start:\n${out}`);
}

describe('usage across two gateway processes and one Redis', () => {
  let redis: TestRedis;
  let emulator: Emulator;
  let a: GatewayProcess;
  let b: GatewayProcess;

  beforeAll(async () => {
    redis = await startRedis({ persist: true });
    emulator = await startEmulator();
    const env = {
      UPSTREAM_URL: emulator.wsBase,
      AUTH_URL: emulator.authBase,
      REDIS_URL: redis.url,
      USAGE_API_TOKEN: API_TOKEN,
      MAX_SESSIONS_PER_TENANT: '3',
      PACE: '6',
      DRAIN_SECONDS: '20',
    };
    [a, b] = await Promise.all([spawnGateway(env), spawnGateway(env)]);
  });
  afterAll(async () => {
    a?.child.kill('SIGKILL');
    b?.child.kill('SIGKILL');
    await emulator?.close();
    await redis?.stop();
  });

  async function connect(gw: GatewayProcess, tenant: string): Promise<TestClient> {
    const token = await emulator.issueToken({ tenant, scope: 'openid transcribe' });
    return openClient(
      `ws://127.0.0.1:${gw.port}/audio-bridge/v2/transcribe?tenant-name=${tenant}&token=${encodeURIComponent(`Bearer ${token}`)}`,
    );
  }

  /** A dictation with two flushes (provisional credits) and an end (final credits). */
  async function dictate(gw: GatewayProcess, tenant: string, o: { end?: boolean } = {}): Promise<TestClient> {
    const c = await connect(gw, tenant);
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
    await c.next('CONFIG_ACCEPTED');
    chunks.slice(0, 12).forEach((x) => c.send(x));
    c.sendJson({ type: 'flush' });
    await c.next('delta_usage', 20_000);
    chunks.slice(12).forEach((x) => c.send(x));
    c.sendJson({ type: 'flush' });
    await c.next('delta_usage', 20_000);
    if (o.end !== false) {
      c.sendJson({ type: 'end' });
      await c.next('ended', 20_000);
    }
    return c;
  }

  async function api(gw: GatewayProcess, path: string) {
    const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
      headers: { authorization: `Bearer ${API_TOKEN}` },
    });
    return { status: res.status, body: (await res.json()) as any };
  }

  it('credits add up to the upstream figures through a Redis restart and a SIGTERM; the cap holds across processes', async () => {
    // Phase 1: sessions on both processes, two tenants.
    await Promise.all([dictate(a, 'acme'), dictate(b, 'acme'), dictate(a, 'globex'), dictate(b, 'globex')]);

    // Phase 2: Redis goes away mid-run; sessions keep going (journaled), Redis comes back.
    const running = [dictate(a, 'acme'), dictate(b, 'globex')];
    await delay(300);
    await redis.stop();
    await Promise.all(running);
    await Promise.all([dictate(a, 'acme'), dictate(b, 'acme')]);
    await redis.restart();

    // Phase 3: the tenant cap (3) holds across both processes; configured sessions hold it (sockets without a config do not).
    const held = await Promise.all([connect(a, 'capped'), connect(b, 'capped'), connect(a, 'capped')]);
    for (const c of held)
      c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
    await Promise.all(held.map((c) => c.next('CONFIG_ACCEPTED')));
    const over = await refusal(
      `ws://127.0.0.1:${b.port}/audio-bridge/v2/transcribe?tenant-name=capped&token=${encodeURIComponent(`Bearer ${await emulator.issueToken({ tenant: 'capped', scope: 'openid transcribe' })}`)}`,
    );
    assert.equal(over.status, 429);
    assert.equal(over.body.error.id, 'TENANT_SESSION_LIMIT');
    held.forEach((c) => c.ws.close());

    // Phase 4: SIGTERM of process b while one of its sessions is mid-stream: it drains gracefully.
    const inFlight = await dictate(b, 'globex', { end: false });
    const bExit = new Promise<number | null>((r) => b.child.once('exit', (code) => r(code)));
    b.child.kill('SIGTERM');
    await inFlight.next('ended', 30_000);
    assert.equal(await bExit, 0, b.output().slice(-2000));

    // Let process a's journal replay finish, then ask the ops API.
    const from = new Date(Date.now() - 86_400_000).toISOString(); // a day back: hour buckets are chosen by their start, and a run may cross an hour
    const to = new Date(Date.now() + 3_600_000).toISOString();
    for (const tenant of ['acme', 'globex']) {
      const expected = upstreamCredits(emulator, tenant);
      let got = -1;
      for (let i = 0; i < 100; i++) {
        const r = await api(a, `/v1/usage?tenant=${tenant}&from=${from}&to=${to}&granularity=hour`);
        assert.equal(r.status, 200);
        got = r.body.total.credits;
        if (Math.abs(got - expected) < 1e-6) break;
        await delay(100);
      }
      assert.ok(Math.abs(got - expected) < 1e-6, `${tenant}: ledger ${got} vs upstream ${expected}`);
      const sessions = await api(a, `/v1/usage/sessions?tenant=${tenant}&from=${from}&to=${to}`);
      assert.equal(sessions.body.sessions.length, emulator.sessions.filter((s) => s.tenant === tenant).length);
      assert.ok(
        sessions.body.sessions.every((s: { estimated: boolean }) => s.estimated === false),
        'every session has its final figure',
      );
    }
    const tenants = await api(a, '/v1/tenants');
    assert.ok(['acme', 'globex'].every((t) => tenants.body.tenants.includes(t)));

    const metrics = await (await fetch(`http://127.0.0.1:${a.adminPort}/metrics`)).text();
    for (const series of [
      'speech_gateway_active_sessions',
      'speech_gateway_sessions_total',
      'speech_gateway_config_latency_seconds',
      'speech_gateway_upstream_connect_seconds',
      'speech_gateway_added_latency_seconds',
      'speech_gateway_audio_bytes_total',
      'speech_gateway_audio_seconds_total',
      'speech_gateway_frames_split_total',
      'speech_gateway_frames_coalesced_total',
      'speech_gateway_transcode_seconds_total',
      'speech_gateway_credits_total',
      'speech_gateway_refusals_total',
      'speech_gateway_usage_journal_depth',
      'speech_gateway_redis_up',
      'nodejs_eventloop_lag_seconds',
      'process_cpu_seconds_total',
    ]) {
      assert.ok(metrics.includes(series), `/metrics shows ${series}`);
    }
    assert.match(metrics, /speech_gateway_credits_total\{[^}]*tenant="acme"/);
  });
});
