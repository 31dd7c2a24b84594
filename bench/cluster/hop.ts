// The internal hop's cost: two gateway replicas (compiled dist/, as production) sharing
// one redis-server and the emulator. Each session opens on replica A with a resume key, streams 2 s
// of Chromium's WebM pieces at real time, drops, resumes, streams the rest and ends; a new one
// follows until the hold ends. A resume that is not `resumed` from the bytes sent counts as failed. Leg "direct": the resume lands on A. Leg "hop": it lands on B, which carries it to A.
// Measured over the hold: the time from a piece's send to the first transcript reaching its media
// end (p50/p95), and the CPU of A and B (every thread, from /proc) per session-hour. The difference
// is what the hop adds. Run: npm run bench -- cluster   Overrides: BENCH_SESSIONS, BENCH_RAMP_S, BENCH_HOLD_S.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { buildGateway, startGateway, type Peer } from '../load/lib/peers.js';
import { treeCpuSeconds } from '../load/lib/proc.js';
import { startRedis } from '../../test/usage/redis.js';

process.env.LOG_LEVEL = 'silent';
const { createMediaClock, startEmulator } = await import('../../src/emulator/index.js');

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const SESSIONS = env('BENCH_SESSIONS', 40);
const RAMP_S = env('BENCH_RAMP_S', 4);
const HOLD_S = env('BENCH_HOLD_S', 20);
const EPS = 0.0015;

const dir = fileURLToPath(new URL('../../test/fixtures/chrome/webm-opus/', import.meta.url));
const pieces = readdirSync(dir)
  .filter((f) => f.endsWith('.bin'))
  .sort()
  .map((f) => readFileSync(join(dir, f)));
const clock = createMediaClock(pieces[0]);
const mediaEnds = pieces.map((p) => clock.add(p));
/** The first socket's share: 2 s, then it drops. */
const FIRST_PIECES = 8;
const firstBytes = pieces.slice(0, FIRST_PIECES).reduce((n, p) => n + p.length, 0);
const config = {
  type: 'config',
  configuration: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/webm;codecs=opus' },
};

interface Leg {
  name: string;
  latencies: number[];
  sessions: number;
  failed: number;
  lost: number;
  cpuA: number;
  cpuB: number;
  why: Record<string, number>;
}

const sleepUntil = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));
const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

/** What this bench reads of the gateway's messages: a transcript's data, CONFIG_ACCEPTED's resume fields. */
interface ServerMessage {
  type: string;
  data?: { isFinal?: boolean; start: number; end: number };
  resumed?: boolean;
  audioBytes?: number;
}

/** Opens a socket, sends the config, resolves on CONFIG_ACCEPTED with the socket and that message. */
function configured(
  url: string,
  onMessage: (m: ServerMessage) => void,
): Promise<{ ws: WebSocket; accepted: ServerMessage }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify(config)));
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as ServerMessage;
      if (m.type === 'CONFIG_ACCEPTED') resolve({ ws, accepted: m });
      else if (/^CONFIG_/.test(m.type) || m.type === 'error') reject(new Error(m.type));
      onMessage(m);
    });
  });
}

/** Sends pieces [from, to) at real time (piece k when a recorder would have it); `sent` is told each send. */
async function stream(
  ws: WebSocket,
  from: number,
  to: number,
  sent: (k: number) => void = () => undefined,
): Promise<void> {
  const began = performance.now() - (from ? mediaEnds[from - 1] : 0) * 1000;
  for (let k = from; k < to; k++) {
    await new Promise((r) => setTimeout(r, Math.max(0, began + (k ? mediaEnds[k - 1] : 0) * 1000 - performance.now())));
    ws.send(pieces[k]);
    sent(k);
  }
}

/** One session: opened on A with a resume key, 2 s streamed until a final (its record is written), dropped,
 * resumed on `resumeAt`, the rest streamed at real time, ended. Pieces after the resume are timed. */
async function session(
  urlOf: (key: string, i: 0 | 1) => Promise<string>,
  resumeAt: 0 | 1,
  leg: Leg,
  holdFrom: number,
): Promise<void> {
  const key = randomBytes(18).toString('base64url');
  const finals: Array<[number, number]> = [];
  const onFinal = (m: ServerMessage) =>
    m.type === 'transcript' && m.data?.isFinal && finals.push([m.data.start, m.data.end]);
  const first = await configured(await urlOf(key, 0), onFinal);
  await stream(first.ws, 0, FIRST_PIECES);
  for (let t = 0; finals.length === 0 && t < 50; t++) await new Promise((r) => setTimeout(r, 100));
  first.ws.terminate();
  await new Promise((r) => setTimeout(r, 100));

  const pending: Array<[number, number, boolean]> = []; // media end, sent at, inside the hold
  let done!: (why: string) => void;
  const finished = new Promise<string>((r) => (done = r));
  const second = await configured(await urlOf(key, resumeAt), (m) => {
    onFinal(m);
    if (m.type === 'transcript' && m.data) covered(m.data.end);
    else if (m.type === 'ended') done('');
  });
  second.ws.on('close', (code, reason) => done(`closed ${code} ${reason.toString().slice(0, 40)} before ended`));
  function covered(end: number) {
    while (pending.length && pending[0][0] < end - EPS) pending.shift();
    const piece = pending[0];
    if (!piece || piece[0] > end + EPS) return;
    pending.shift();
    if (piece[2]) leg.latencies.push(performance.now() - piece[1]);
  }
  const resumed =
    second.accepted.resumed !== true
      ? 'not resumed'
      : second.accepted.audioBytes !== firstBytes
        ? `audioBytes ${second.accepted.audioBytes} of ${firstBytes}`
        : '';
  await stream(second.ws, FIRST_PIECES, pieces.length, (k) =>
    pending.push([mediaEnds[k], performance.now(), Date.now() >= holdFrom]),
  );
  second.ws.send('{"type":"end"}');
  const why = resumed || (await finished);
  second.ws.close();
  leg.sessions++;
  if (why) {
    leg.failed++;
    leg.why[why] = (leg.why[why] ?? 0) + 1;
  }
  const ok = !why;
  let at = 0;
  for (const [start, end] of finals) {
    if (Math.abs(start - at) > EPS) {
      leg.lost++;
      const what = start > at ? `final gap after ${at.toFixed(2)} s` : `final repeated at ${start.toFixed(2)} s`;
      leg.why[what] = (leg.why[what] ?? 0) + 1;
    }
    at = Math.max(at, end);
  }
  if (ok && at < mediaEnds.at(-1)! - EPS) leg.lost++;
}

async function runLeg(
  name: string,
  resumeAt: 0 | 1,
  urlOf: (key: string, i: 0 | 1) => Promise<string>,
  a: Peer,
  b: Peer,
): Promise<Leg> {
  const leg: Leg = { name, latencies: [], sessions: 0, failed: 0, lost: 0, cpuA: 0, cpuB: 0, why: {} };
  const startAt = Date.now() + 500;
  const holdFrom = startAt + RAMP_S * 1000;
  const stopAt = holdFrom + HOLD_S * 1000;
  let cpu0: number[] = [];
  const marks = [
    setTimeout(() => (cpu0 = [treeCpuSeconds(a.pid), treeCpuSeconds(b.pid)]), holdFrom - Date.now()),
    setTimeout(() => {
      leg.cpuA = treeCpuSeconds(a.pid) - cpu0[0];
      leg.cpuB = treeCpuSeconds(b.pid) - cpu0[1];
    }, stopAt - Date.now()),
  ];
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      await sleepUntil(startAt + (i / SESSIONS) * RAMP_S * 1000);
      while (Date.now() < stopAt) {
        await session(urlOf, resumeAt, leg, holdFrom).catch((err: Error) => {
          leg.failed++;
          leg.why[err.message] = (leg.why[err.message] ?? 0) + 1;
        });
      }
    }),
  );
  marks.forEach(clearTimeout);
  return leg;
}

const work = mkdtempSync(join(tmpdir(), 'sgw-hop-bench-'));
const redis = await startRedis();
const emulator = await startEmulator();
buildGateway();
const shared = {
  REDIS_URL: redis.url,
  UPSTREAM_URL: emulator.wsBase,
  AUTH_URL: emulator.authBase,
  CLUSTER_SECRET: randomBytes(32).toString('hex'),
};
const a = await startGateway(work, { ...shared, REPLICA_ID: 'bench-a' });
const b = await startGateway(work, { ...shared, REPLICA_ID: 'bench-b' });
const urlOf = async (key: string, i: 0 | 1) => {
  const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}`, resume: key });
  return `ws://127.0.0.1:${[a, b][i].port}/audio-bridge/v2/transcribe?${q}`;
};
try {
  console.log(
    `${SESSIONS} sessions, ramp ${RAMP_S} s, hold ${HOLD_S} s; each: ${mediaEnds.at(-1)!.toFixed(1)} s of WebM at real time, opened on A, dropped after 2 s, resumed on A (direct) or B (hop)`,
  );
  const legs = [await runLeg('direct', 0, urlOf, a, b), await runLeg('hop', 1, urlOf, a, b)];
  const perHour = (cpu: number) => cpu / ((SESSIONS * HOLD_S) / 3600);
  console.log('| leg | sessions (failed) | finals lost | p50 ms | p95 ms | CPU s/session-h A | B | A+B |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const l of legs) {
    console.log(
      `| ${l.name} | ${l.sessions} (${l.failed}) | ${l.lost} | ${percentile(l.latencies, 50).toFixed(1)} | ${percentile(l.latencies, 95).toFixed(1)} | ${perHour(l.cpuA).toFixed(2)} | ${perHour(l.cpuB).toFixed(2)} | ${perHour(l.cpuA + l.cpuB).toFixed(2)} |`,
    );
  }
  for (const l of legs) if (l.failed || l.lost) console.log(`${l.name}: ${JSON.stringify(l.why)}`);
  const [d, h] = legs;
  const added = {
    p50Ms: percentile(h.latencies, 50) - percentile(d.latencies, 50),
    p95Ms: percentile(h.latencies, 95) - percentile(d.latencies, 95),
    cpuSecondsPerSessionHour: perHour(h.cpuA + h.cpuB - d.cpuA - d.cpuB),
  };
  console.log(
    `the hop adds: p50 ${added.p50Ms.toFixed(1)} ms, p95 ${added.p95Ms.toFixed(1)} ms per piece; ${added.cpuSecondsPerSessionHour.toFixed(2)} CPU s per hopped session-hour`,
  );
  const results = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(results, { recursive: true });
  const summary = legs.map(({ latencies, ...l }) => ({
    ...l,
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    pieces: latencies.length,
  }));
  writeFileSync(
    join(results, 'cluster-hop.json'),
    JSON.stringify({ sessions: SESSIONS, holdS: HOLD_S, legs: summary, added }, null, 2) + '\n',
  );
} finally {
  await a.stop();
  await b.stop();
  await emulator.close();
  await redis.stop();
  rmSync(work, { recursive: true, force: true });
}
