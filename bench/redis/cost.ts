// Redis's cost per session in steady streaming: one gateway replica (the compiled dist/, as
// production runs it) with a real redis-server, the emulator upstream and CLUSTER_SECRET set (so
// session records and the hop are on as in production). N resumable sessions (a resume key each)
// stream Chromium's WebM/Opus pieces at real time, the fixture looped with continuing Cluster
// timecodes (lib/webm-loop.ts), so every session streams through the whole window. Once all are
// configured and streaming, Redis's own counters are read before and after the window: INFO
// commandstats (calls per command; EVALSHA and the commands its Lua runs are each counted) and INFO
// stats (network bytes in and out). A short MONITOR window afterwards splits each command into
// top-level (from the gateway) and run inside Lua; it is separate because MONITOR's feed would count
// in the bytes out. Then the session records' memory. Reported per session-second and session-hour,
// against the targets (≤ 0.25 commands and ≤ 150 bytes written per session-second).
// Run: npm run bench -- redis   Overrides: BENCH_SESSIONS (100), BENCH_HOLD_S (30), BENCH_RAMP_S (5),
// BENCH_SETTLE_S (3), BENCH_MONITOR_S (5). Writes bench/results/redis-cost.json and redis-cost.md.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { buildGateway, startGateway } from '../load/lib/peers.js';
import { startRedis } from '../../test/usage/redis.js';
import { loopWebm } from './lib/webm-loop.js';
import { callsBetween, monitorSplit, recordSizes, snapshot, type Snapshot } from './lib/redis-stats.js';

process.env.LOG_LEVEL = 'silent';
const { startEmulator } = await import('../../src/emulator/index.js');

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const SESSIONS = env('BENCH_SESSIONS', 100);
const HOLD_S = env('BENCH_HOLD_S', 30);
const RAMP_S = env('BENCH_RAMP_S', 5);
const SETTLE_S = env('BENCH_SETTLE_S', 3);
const MONITOR_S = env('BENCH_MONITOR_S', 5);
/** A primary's command budget for the capacity figures, and the targets. */
const PRIMARY_OPS = 100_000;
const TARGET = { commands: 0.25, bytes: 150 };
/** Commands this bench sends Redis itself (left out of the counts). */
const OWN = new Set(['info', 'monitor', 'quit', 'client|setname', 'client|info']);

const media = loopWebm(fileURLToPath(new URL('../../test/fixtures/chrome/webm-opus/', import.meta.url)));
const config = {
  type: 'config',
  configuration: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/webm;codecs=opus' },
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** One session: configured, then the looped stream at real time until `stopped`. */
interface Live {
  configuredAt?: number;
  closedAt?: number;
  why?: string;
  ws?: WebSocket;
}

function open(url: string, live: Live, stopped: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    live.ws = ws;
    const fail = (why: string) => {
      live.why ??= why;
      live.closedAt ??= Date.now();
      resolve();
    };
    ws.on('error', (e) => fail(e.message));
    ws.on('close', (code, reason) => fail(`closed ${code} ${reason.toString().slice(0, 40)}`));
    ws.on('open', () => ws.send(JSON.stringify(config)));
    ws.on('message', (data) => {
      const type = (JSON.parse(data.toString()) as { type: string }).type;
      if (type === 'CONFIG_ACCEPTED') {
        live.configuredAt = Date.now();
        resolve();
        void stream(ws, stopped);
      } else if (/^CONFIG_/.test(type) || type === 'error') fail(type);
    });
  });
}

async function stream(ws: WebSocket, stopped: () => boolean): Promise<void> {
  const began = performance.now();
  for (let k = 0; !stopped() && ws.readyState === WebSocket.OPEN; k++) {
    await sleep(began + media.sendAt(k) * 1000 - performance.now());
    if (ws.readyState === WebSocket.OPEN && !stopped()) ws.send(media.piece(k));
  }
}

/** Seconds each session was configured and open inside [from, to], summed. */
function sessionSeconds(lives: Live[], from: number, to: number): number {
  return lives.reduce((s, l) => {
    if (l.configuredAt === undefined) return s;
    const a = Math.max(from, l.configuredAt);
    const b = Math.min(to, l.closedAt ?? to);
    return s + Math.max(0, b - a) / 1000;
  }, 0);
}

async function ending(lives: Live[]): Promise<void> {
  for (const l of lives) if (l.ws?.readyState === WebSocket.OPEN) l.ws.send('{"type":"end"}');
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && lives.some((l) => l.ws?.readyState === WebSocket.OPEN)) await sleep(100);
  for (const l of lives) l.ws?.terminate();
}

interface Window {
  seconds: number;
  sessionSeconds: number;
  calls: Record<string, number>;
  netIn: number;
  netOut: number;
}

function between(a: Snapshot, b: Snapshot, lives: Live[], from: number, to: number): Window {
  return {
    seconds: (to - from) / 1000,
    sessionSeconds: sessionSeconds(lives, from, to),
    calls: callsBetween(a, b, OWN),
    netIn: b.netIn - a.netIn,
    netOut: b.netOut - a.netOut,
  };
}

/** Per command: calls per session-second, split top-level / in Lua by the MONITOR window's shares. */
function byCommand(w: Window, split: { top: Record<string, number>; lua: Record<string, number> }) {
  return Object.entries(w.calls)
    .sort(([, a], [, b]) => b - a)
    .map(([cmd, calls]) => {
      const name = cmd.split('|')[0];
      const top = split.top[name] ?? 0;
      const lua = split.lua[name] ?? 0;
      // Redis counts a Lua call under the command's own name; a command MONITOR did not see in
      // its shorter window is taken as top-level.
      const topShare = top + lua ? top / (top + lua) : 1;
      const perS = calls / w.sessionSeconds;
      return {
        command: cmd,
        calls,
        perSessionSecond: perS,
        topLevelPerSessionSecond: perS * topShare,
        inLuaPerSessionSecond: perS * (1 - topShare),
        perSessionHour: perS * 3600,
      };
    });
}

type Rows = ReturnType<typeof byCommand>;

function summarise(w: Window, rows: Rows, records: Awaited<ReturnType<typeof recordSizes>>, memoryPerSession: number) {
  const sum = (f: (r: Rows[number]) => number) => rows.reduce((s, r) => s + f(r), 0);
  const all = sum((r) => r.perSessionSecond);
  const top = sum((r) => r.topLevelPerSessionSecond);
  const bytesIn = w.netIn / w.sessionSeconds;
  return {
    commandsPerSessionSecond: { all, topLevel: top, inLua: all - top },
    commandsPerSessionHour: { all: all * 3600, topLevel: top * 3600 },
    bytesWrittenPerSessionSecond: bytesIn,
    bytesReadPerSessionSecond: w.netOut / w.sessionSeconds,
    records,
    usedMemoryPerSession: memoryPerSession,
    // Every call Redis counts (top-level and in Lua) against its budget, as the target counts them;
    // top-level only is the optimistic bound (a Lua call is cheaper than a client's).
    sessionsPerPrimary: { all: PRIMARY_OPS / all, topLevel: PRIMARY_OPS / top },
    sessionsPer3Shards: { all: (3 * PRIMARY_OPS) / all, topLevel: (3 * PRIMARY_OPS) / top },
    target: {
      commands: { limit: TARGET.commands, measured: all, met: all <= TARGET.commands },
      bytes: { limit: TARGET.bytes, measured: bytesIn, met: bytesIn <= TARGET.bytes },
    },
  };
}

type Summary = ReturnType<typeof summarise>;
const f = (x: number, d = 2) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const n0 = (x: number) => Math.round(x).toLocaleString('en-US');

function markdown(head: string, w: Window, rows: Rows, s: Summary): string {
  const met = (t: { met: boolean }) => (t.met ? 'met' : 'missed');
  return [
    head,
    '',
    '| command | calls in window | per session-s | of which top-level | of which in Lua | per session-h |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.command} | ${r.calls} | ${f(r.perSessionSecond)} | ${f(r.topLevelPerSessionSecond)} | ${f(r.inLuaPerSessionSecond)} | ${n0(r.perSessionHour)} |`,
    ),
    `| **all** | ${Object.values(w.calls).reduce((a, b) => a + b, 0)} | ${f(s.commandsPerSessionSecond.all)} | ${f(s.commandsPerSessionSecond.topLevel)} | ${f(s.commandsPerSessionSecond.inLua)} | ${n0(s.commandsPerSessionHour.all)} |`,
    '',
    '| figure | per session |',
    '|---|---|',
    `| bytes written to Redis (net input) per session-s | ${n0(s.bytesWrittenPerSessionSecond)} (${f((s.bytesWrittenPerSessionSecond * 3600) / 1e6, 1)} MB per session-h) |`,
    `| bytes read from Redis (net output) per session-s | ${n0(s.bytesReadPerSessionSecond)} |`,
    `| session records (sgw:rec:*) at the window's end | ${s.records.keys}; MEMORY USAGE ${n0(s.records.memoryUsage)} B, value ${n0(s.records.valueBytes)} B (mean of ${s.records.sampled}); ${s.records.allKeys} keys in all |`,
    `| session position (a field of sgw:pos:<replica>) | ${n0(s.records.positionBytes)} B (the hash's MEMORY USAGE over its fields) |`,
    `| ledger session hash (sg:usage:s:*, kept USAGE_RETENTION_DAYS after the session) | MEMORY USAGE ${n0(s.records.ledgerMemoryUsage)} B (mean of ${s.records.sampled}), while streaming |`,
    `| used_memory growth per open session (with Redis's fixed costs: scripts, client buffers) | ${n0(s.usedMemoryPerSession)} B |`,
    `| sessions per primary at ${n0(PRIMARY_OPS)} commands/s (all counted / top-level only) | ${n0(s.sessionsPerPrimary.all)} / ${n0(s.sessionsPerPrimary.topLevel)} |`,
    `| sessions on a 3-shard cluster (3×) | ${n0(s.sessionsPer3Shards.all)} / ${n0(s.sessionsPer3Shards.topLevel)} |`,
    `| target ≤ ${TARGET.commands} commands per session-s (all counted) | ${f(s.target.commands.measured)}: ${met(s.target.commands)} |`,
    `| target ≤ ${TARGET.bytes} bytes written per session-s | ${n0(s.target.bytes.measured)}: ${met(s.target.bytes)} |`,
    '',
  ].join('\n');
}

function write(json: unknown, md: string): void {
  const results = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(results, { recursive: true });
  writeFileSync(join(results, 'redis-cost.json'), JSON.stringify(json, null, 2) + '\n');
  writeFileSync(join(results, 'redis-cost.md'), md);
}

/** Opens the sessions over the ramp and waits until each is configured or failed. */
async function rampUp(lives: Live[], urlOf: (key: string) => Promise<string>, stopped: () => boolean) {
  const t0 = Date.now();
  await Promise.all(
    lives.map(async (live, i) => {
      await sleep(t0 + (i / lives.length) * RAMP_S * 1000 - Date.now());
      const key = randomBytes(18).toString('base64url');
      await open(await urlOf(key), live, stopped).catch((e: Error) => void (live.why ??= e.message));
    }),
  );
}

async function measure(redis: Redis, lives: Live[], baseline: number) {
  const from = Date.now();
  const a = await snapshot(redis);
  await sleep(HOLD_S * 1000);
  const b = await snapshot(redis);
  const w = between(a, b, lives, from, Date.now());
  const monitor = await monitorSplit(redis);
  await sleep(MONITOR_S * 1000);
  const split = await monitor.stop();
  const records = await recordSizes(redis, 20);
  const open = lives.filter((l) => l.configuredAt !== undefined && l.closedAt === undefined).length;
  return { w, split, records, memoryPerSession: (b.usedMemory - baseline) / Math.max(1, open) };
}

const work = mkdtempSync(join(tmpdir(), 'sgw-redis-bench-'));
const redisServer = await startRedis();
const emulator = await startEmulator();
buildGateway();
const gateway = await startGateway(work, {
  REDIS_URL: redisServer.url,
  UPSTREAM_URL: emulator.wsBase,
  AUTH_URL: emulator.authBase,
  CLUSTER_SECRET: randomBytes(32).toString('hex'),
  REPLICA_ID: 'bench-redis',
  // A tenant cap, as production sets one: the limiter's leases are renewed while sessions stream.
  MAX_SESSIONS_PER_TENANT: String(SESSIONS * 2),
});
const redis = new Redis(redisServer.url);
const urlOf = async (key: string) => {
  const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}`, resume: key });
  return `ws://127.0.0.1:${gateway.port}/audio-bridge/v2/transcribe?${q}`;
};
let stop = false;
const lives: Live[] = Array.from({ length: SESSIONS }, () => ({}));
try {
  const load0 = loadavg()[0];
  const baseline = (await snapshot(redis)).usedMemory;
  console.log(
    `${SESSIONS} sessions over ${RAMP_S} s, settle ${SETTLE_S} s, window ${HOLD_S} s (then MONITOR ${MONITOR_S} s): WebM/Opus at real time, fixture looped every ${media.loopSeconds} s`,
  );
  await rampUp(lives, urlOf, () => stop);
  await sleep(SETTLE_S * 1000);
  const { w, split, records, memoryPerSession } = await measure(redis, lives, baseline);
  stop = true;
  const rows = byCommand(w, split);
  const s = summarise(w, rows, records, memoryPerSession);
  const configured = lives.filter((l) => l.configuredAt !== undefined).length;
  const failed = lives.filter((l) => l.why).map((l) => l.why!);
  const head =
    `${SESSIONS} resumable WebM/Opus sessions on one gateway replica (dist/) with Redis, ${configured} configured, ` +
    `${failed.length} closed or failed before the end; window ${f(w.seconds, 1)} s = ${f(w.sessionSeconds, 0)} session-s; ` +
    `${cpus().length} cores, load average ${f(load0)} at start and ${f(loadavg()[0])} at end (what else ran shows there).`;
  const md = markdown(head, w, rows, s);
  console.log(md);
  if (failed.length) console.log('failures:', failed.slice(0, 10));
  write(
    { sessions: SESSIONS, configured, failed: failed.length, holdS: HOLD_S, window: w, split, byCommand: rows, ...s },
    `# Redis cost per session (bench/redis/cost.ts)\n\n${md}`,
  );
} finally {
  stop = true;
  await ending(lives);
  redis.disconnect();
  await gateway.stop();
  await emulator.close();
  await redisServer.stop();
  rmSync(work, { recursive: true, force: true });
}
