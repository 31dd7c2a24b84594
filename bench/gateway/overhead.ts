// Gateway overhead: session set-up latency, N concurrent whole-file dictations (wall, sessions/s, CPU)
// and flush→flushed relay latency, each measured against the emulator directly and through the
// gateway in the same run, reported as gateway/direct ratios (the machine is shared and noisy, so
// only ratios against a peer measured alongside mean anything; rounds are interleaved for that).
// Run: npx tsx bench/gateway/overhead.ts  [BENCH_SETUP_N=50 BENCH_CONCURRENT=20 BENCH_FLUSH_N=100]
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';

// Silence the gateway's logger before its modules load (it reads LOG_LEVEL at import time).
process.env.LOG_LEVEL = 'silent';
const { startEmulator } = await import('../../src/emulator/index.js');
const { startGateway } = await import('../../src/gateway.js');
const { loadConfig } = await import('../../src/config.js');

const FIXTURE = new URL('../../test/fixtures/dictation.ogg', import.meta.url);
const RESULTS = new URL('../results/gateway-overhead.json', import.meta.url);
const SETUP_N = Number(process.env.BENCH_SETUP_N ?? 50);
const CONCURRENT = Number(process.env.BENCH_CONCURRENT ?? 20);
const CONCURRENT_ROUNDS = Number(process.env.BENCH_CONCURRENT_ROUNDS ?? 10);
const FLUSH_N = Number(process.env.BENCH_FLUSH_N ?? 100);
const FRAME = 4000;
const TIMEOUT_MS = 15_000;
const CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' };

const ogg = readFileSync(FIXTURE);
const frames: Buffer[] = [];
for (let i = 0; i < ogg.length; i += FRAME) frames.push(ogg.subarray(i, i + FRAME));

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};
const median = (xs: number[]) => pct(xs, 50);
const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

/** A minimal client: JSON messages queued per type, so waiting costs the same on both paths. */
class Client {
  private queued = new Map<string, unknown[]>();
  private waiting = new Map<string, Array<(m: unknown) => void>>();
  private failure?: Error;
  readonly closed: Promise<void>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const m = JSON.parse(data.toString()) as { type: string };
      const w = this.waiting.get(m.type)?.shift();
      if (w) w(m);
      else (this.queued.get(m.type) ?? this.queued.set(m.type, []).get(m.type)!).push(m);
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code) => {
        this.failure = new Error(`socket closed (${code}) while waiting`);
        for (const ws of this.waiting.values()) for (const w of ws.splice(0)) w(this.failure);
        resolve();
      }),
    );
  }

  static open(url: string): Promise<Client> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Client(ws)));
      ws.once('unexpected-response', (_req, res) =>
        reject(new Error(`HTTP ${res.statusCode} from ${url.split('?')[0]}`)),
      );
      ws.once('error', reject);
    });
  }

  send(m: unknown) {
    this.ws.send(typeof m === 'string' || Buffer.isBuffer(m) ? m : JSON.stringify(m));
  }

  next(type: string): Promise<unknown> {
    const q = this.queued.get(type);
    if (q?.length) return Promise.resolve(q.shift());
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "${type}" within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      const list = this.waiting.get(type) ?? this.waiting.set(type, []).get(type)!;
      list.push((m) => {
        clearTimeout(timer);
        if (m instanceof Error) reject(m);
        else resolve(m);
      });
    });
  }

  /** Protocol-clean goodbye: end, ended, close. */
  async end() {
    this.send({ type: 'end' });
    await this.next('ended');
    await this.closed;
  }
}

// --- the two peers -------------------------------------------------------------------------------
const journalDir = mkdtempSync(join(tmpdir(), 'sgw-bench-journal-'));
const emulator = await startEmulator({ port: 0, host: '127.0.0.1' });
const gateway = await startGateway(
  loadConfig({
    PORT: '0',
    ADMIN_PORT: '0',
    HOST: '127.0.0.1',
    UPSTREAM_URL: emulator.wsBase,
    AUTH_URL: emulator.authBase,
    PACE: '1000',
    LOG_LEVEL: 'silent',
    USAGE_JOURNAL_DIR: journalDir,
    DRAIN_SECONDS: '2',
  }),
);

type Path = 'direct' | 'gateway';
const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
const query = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` }).toString();
const urls: Record<Path, string> = {
  direct: `${emulator.wsBase}/transcribe?${query}`,
  gateway: `ws://127.0.0.1:${gateway.server.port}/audio-bridge/v2/transcribe?${query}`,
};
for (const u of Object.values(urls))
  if (!/^ws:\/\/127\.0\.0\.1:/.test(u)) throw new Error(`not loopback: ${u.split('?')[0]}`);

async function configured(path: Path): Promise<Client> {
  const c = await Client.open(urls[path]);
  c.send({ type: 'config', configuration: CONFIG });
  await c.next('CONFIG_ACCEPTED');
  return c;
}

// (1) connect + config → CONFIG_ACCEPTED, sequential.
async function setupOnce(path: Path): Promise<number> {
  const t0 = performance.now();
  const c = await configured(path);
  const ms = performance.now() - t0;
  await c.end();
  return ms;
}

// (2) CONCURRENT sessions, each the whole file as fast as it can be written, then end → ended.
async function concurrentRound(path: Path) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENT }, async () => {
      const c = await configured(path);
      for (const f of frames) c.send(f);
      await c.end();
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  return { wallS: wall, sessionsPerS: CONCURRENT / wall, cpuS: cpuSeconds(process.cpuUsage(cpu0)) };
}

// (3) flush → flushed on one configured session that has sent some audio.
async function flushLatencies(path: Path, n: number): Promise<number[]> {
  const c = await configured(path);
  for (const f of frames.slice(0, 3)) c.send(f);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    c.send({ type: 'flush' });
    await c.next('flushed');
    out.push(performance.now() - t0);
  }
  await c.end();
  return out;
}

const started = performance.now();
const paths: Path[] = ['direct', 'gateway'];

// Warm-up: JWKS fetch, encoder pool, JIT on both paths; not measured.
for (const p of paths) {
  for (let i = 0; i < 3; i++) await setupOnce(p);
  await flushLatencies(p, 5);
}
await Promise.all(
  paths.map(async (p) => {
    const c = await configured(p);
    for (const f of frames) c.send(f);
    await c.end();
  }),
);

// Interleave blocks of each workload so drift in machine load hits both paths alike.
const setup: Record<Path, number[]> = { direct: [], gateway: [] };
const BLOCK = 10;
for (let done = 0; done < SETUP_N; done += BLOCK) {
  for (const p of paths) for (let i = 0; i < Math.min(BLOCK, SETUP_N - done); i++) setup[p].push(await setupOnce(p));
}

const rounds: Record<Path, Array<Awaited<ReturnType<typeof concurrentRound>>>> = { direct: [], gateway: [] };
for (let r = 0; r < CONCURRENT_ROUNDS; r++) {
  for (const p of r % 2 ? [...paths].reverse() : paths) rounds[p].push(await concurrentRound(p));
}

const flush: Record<Path, number[]> = { direct: [], gateway: [] };
for (let done = 0; done < FLUSH_N; done += 25) {
  for (const p of paths) flush[p].push(...(await flushLatencies(p, Math.min(25, FLUSH_N - done))));
}
const totalS = (performance.now() - started) / 1000;

// --- report --------------------------------------------------------------------------------------
const summarize = (p: Path) => ({
  setupP50Ms: pct(setup[p], 50),
  setupP95Ms: pct(setup[p], 95),
  concurrentWallS: median(rounds[p].map((r) => r.wallS)),
  concurrentSessionsPerS: median(rounds[p].map((r) => r.sessionsPerS)),
  concurrentCpuS: median(rounds[p].map((r) => r.cpuS)),
  flushP50Ms: pct(flush[p], 50),
  flushP95Ms: pct(flush[p], 95),
});
const direct = summarize('direct');
const viaGateway = summarize('gateway');
const keys = Object.keys(direct) as Array<keyof typeof direct>;
const ratio = Object.fromEntries(keys.map((k) => [k, viaGateway[k] / direct[k]])) as Record<
  keyof typeof direct,
  number
>;

const label: Record<keyof typeof direct, string> = {
  setupP50Ms: `set-up p50 (ms, N=${SETUP_N})`,
  setupP95Ms: `set-up p95 (ms, N=${SETUP_N})`,
  concurrentWallS: `${CONCURRENT} sessions wall (s)`,
  concurrentSessionsPerS: `${CONCURRENT} sessions sessions/s`,
  concurrentCpuS: `${CONCURRENT} sessions CPU (s)`,
  flushP50Ms: `flush→flushed p50 (ms, N=${FLUSH_N})`,
  flushP95Ms: `flush→flushed p95 (ms, N=${FLUSH_N})`,
};
const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(3));
console.log(
  `gateway overhead vs emulator directly — ${availableParallelism()} cores, ${frames.length} frames of ${FRAME} B a session, ` +
    `median of ${CONCURRENT_ROUNDS} concurrent rounds, CPU = this whole process (client + emulator [+ gateway])`,
);
console.log(`${'measure'.padEnd(34)}${'direct'.padStart(10)}${'gateway'.padStart(10)}${'gw/direct'.padStart(11)}`);
for (const k of keys) {
  console.log(
    `${label[k].padEnd(34)}${fmt(direct[k]).padStart(10)}${fmt(viaGateway[k]).padStart(10)}${ratio[k].toFixed(2).padStart(10)}x`,
  );
}
console.log(
  `(ratio > 1 is the gateway costing more, except sessions/s where < 1 is worse; run took ${totalS.toFixed(1)} s)`,
);

const violations = emulator.violations.slice();
if (violations.length) {
  const kinds = new Map<string, number>();
  for (const v of violations) {
    const kind = v
      .replace(/^[^:]*session \d+: /, '')
      .split(/[:(]/)[0]
      .trim();
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  console.log(
    `emulator recorded ${violations.length} protocol violations (${[...kinds].map(([k, n]) => `${k}: ${n}`).join(', ')}); ` +
      "expected: whole files are sent unpaced directly, and at PACE=1000 through the gateway, above the emulator's 1.5x limit",
  );
}

mkdirSync(new URL('.', RESULTS), { recursive: true });
writeFileSync(
  RESULTS,
  JSON.stringify(
    {
      bench: 'gateway/overhead',
      date: new Date().toISOString(),
      cores: availableParallelism(),
      setupN: SETUP_N,
      concurrentSessions: CONCURRENT,
      concurrentRounds: CONCURRENT_ROUNDS,
      flushN: FLUSH_N,
      frameBytes: FRAME,
      framesPerSession: frames.length,
      pace: 1000,
      direct,
      gateway: viaGateway,
      ratio,
      rounds,
      emulatorViolations: violations.length,
      runSeconds: totalS,
    },
    null,
    2,
  ) + '\n',
);

await gateway.stop();
await emulator.close();
rmSync(journalDir, { recursive: true, force: true });
setTimeout(() => process.exit(0), 2000).unref();
