// Load benchmark: N concurrent real-time dictations of a browser-recorded WebM/Opus
// stream (250 ms pieces, config, a flush now and then, end), ramp then hold, through each peer in
// one run against one upstream: direct (the floor), nginx, a naive `ws` proxy, the gateway
// (passthrough, PCM transcoding, and wss upstream like nginx's TLS leg), and the gateway while
// autocannon hits /metrics and /v1/usage on the admin port. Writes bench/results/load.json and load.md.
// Run: npm run bench -- load  (quick: 300 sessions)   npm run bench -- load --full  (1,500)
// Overrides: BENCH_SESSIONS, BENCH_RAMP_S, BENCH_HOLD_S, BENCH_WORKERS, BENCH_ONLY (legs),
// BENCH_GATEWAY_ARGS (node flags for the gateway, e.g. --cpu-prof).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drive, type Audio, type Load } from './lib/drive.js';
import {
  buildGateway,
  ensureTools,
  makeCert,
  startGateway,
  startNaive,
  startNginx,
  startUpstream,
  type Peer,
} from './lib/peers.js';
import { hitHttp } from './lib/http.js';
import { treeRss } from './lib/proc.js';
import { report, type Leg } from './lib/report.js';

process.env.LOG_LEVEL = 'silent';
const { createMediaClock } = await import('../../src/emulator/index.js');

const full = process.argv.includes('--full');
const env = (k: string, d: number) => Number(process.env[k] ?? d);
const load: Load = {
  sessions: env('BENCH_SESSIONS', full ? 1500 : 300),
  workers: env('BENCH_WORKERS', full ? 4 : 3),
  rampS: env('BENCH_RAMP_S', full ? 15 : 4),
  holdS: env('BENCH_HOLD_S', full ? 15 : 8),
};
const WARM_UP: Load = { sessions: 3, workers: 1, rampS: 0.5, holdS: 1.5 };
const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

/** Chromium's own 250 ms MediaRecorder pieces, and the media time the upstream counts after each. */
function webm(): Audio {
  const dir = join(fixtures, 'chrome/webm-opus');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => join(dir, f));
  const bufs = files.map((f) => readFileSync(f));
  const clock = createMediaClock(bufs[0]);
  return {
    config: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/webm;codecs=opus' },
    pieces: bufs.map((b, i) => ({ file: files[i], start: 0, end: b.length })),
    mediaEnds: bufs.map((b) => clock.add(b)),
    tolerance: 0,
  };
}

/** 16 kHz mono s16le in 250 ms pieces (8000 bytes), as long as the WebM stream. */
function pcm(seconds: number): Audio {
  const file = join(fixtures, 'dictation-16k-s16le.pcm');
  const n = Math.min(Math.floor(readFileSync(file).length / 8000), Math.ceil(seconds / 0.25));
  return {
    config: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/pcm;rate=16000;channels=1' },
    pieces: Array.from({ length: n }, (_, i) => ({ file, start: i * 8000, end: (i + 1) * 8000 })),
    mediaEnds: Array.from({ length: n }, (_, i) => (i + 1) * 0.25),
    tolerance: 0.04, // an Opus encoder emits whole 20 ms frames: up to two wait for the next piece
  };
}

ensureTools();
buildGateway();
const dir = mkdtempSync(join(tmpdir(), 'sgw-bench-load-'));
const tls = makeCert(dir);
const upstream = await startUpstream(tls);
const query = `?tenant-name=base&token=${encodeURIComponent(`Bearer ${upstream.token}`)}`;
const path = `/audio-bridge/v2/transcribe${query}`;
const audio = webm();
const pcmAudio = pcm(audio.mediaEnds.at(-1)!);
const gatewayEnv = (scheme: 'ws' | 'wss') => ({
  UPSTREAM_URL: `${scheme}://127.0.0.1:${scheme === 'wss' ? upstream.tlsPort : upstream.port}/audio-bridge/v2`,
  AUTH_URL: `http://127.0.0.1:${upstream.port}`,
  USAGE_API_TOKEN: 'bench-usage-token',
  ...(scheme === 'wss' ? { NODE_EXTRA_CA_CERTS: tls.cert } : {}),
});

type Plan = { name: string; start: () => Promise<Peer | null>; audio?: Audio; http?: boolean };
const plans: Plan[] = [
  { name: 'direct', start: async () => null },
  { name: 'nginx', start: () => startNginx(dir, { port: upstream.port }) },
  { name: 'naive ws proxy', start: () => startNaive(upstream.port) },
  { name: 'gateway', start: () => startGateway(dir, gatewayEnv('ws')) },
  { name: 'gateway PCM→Opus', start: () => startGateway(dir, gatewayEnv('ws')), audio: pcmAudio },
  { name: 'nginx, wss upstream', start: () => startNginx(dir, { port: upstream.tlsPort, tls }) },
  { name: 'gateway, wss upstream', start: () => startGateway(dir, gatewayEnv('wss')) },
  { name: 'gateway + HTTP load', start: () => startGateway(dir, gatewayEnv('ws')), http: true },
  { name: 'direct, again last', start: async () => null },
];

// BENCH_ONLY=gateway,nginx runs only the legs of those names (the direct legs always run); a
// comma followed by a space is part of a name ("gateway, wss upstream").
const only = process.env.BENCH_ONLY?.split(/,(?! )/);
const chosen = only ? plans.filter((p) => p.name.startsWith('direct') || only.includes(p.name)) : plans;
const began = Date.now();
console.log(
  `load: ${load.sessions} sessions, ${load.workers} generator processes, ramp ${load.rampS} s, hold ${load.holdS} s, ` +
    `a session: ${audio.pieces.length} MediaRecorder pieces, ${audio.mediaEnds.at(-1)!.toFixed(2)} s (then a new one)`,
);
const legs: Leg[] = [];
try {
  for (const plan of chosen) {
    const peer = await plan.start();
    await new Promise((r) => setTimeout(r, 1000)); // settle before the idle reading
    const idleRssBytes = peer ? treeRss(peer.pid) : 0;
    const url = `ws://127.0.0.1:${peer?.port ?? upstream.port}${path}`;
    await drive(url, plan.audio ?? audio, WARM_UP, null); // first-session costs (token keys, lazy modules) stay out of the numbers
    const during = plan.http ? (from: number, to: number) => hitHttp(peer!.adminPort!, from, to) : undefined;
    const result = await drive(url, plan.audio ?? audio, load, peer?.pid ?? null, during);
    await peer?.stop();
    legs.push({ name: plan.name, ...result, idleRssBytes });
    console.log(
      `  ${plan.name}: accepted ${result.accepted}/${result.started}, errors ${JSON.stringify(result.errors)}`,
    );
    for (const n of result.notes) console.log(`    finals: ${n}`);
  }
} finally {
  await upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}
report(legs, load, full, (Date.now() - began) / 1000);
