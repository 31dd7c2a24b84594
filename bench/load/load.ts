// Load benchmark: N concurrent real-time dictations through each peer in one run against one
// upstream: direct (the floor), nginx, a naive `ws` proxy, a bare relay on the gateway's own two
// sockets (uWS and its upstream client: what the stack costs before the gateway does anything) and
// the same relay keeping each audio frame as long as the replay keeps a piece, the
// gateway (passthrough of Chromium's WebM/Opus with 60 ms packets and of an encoder's 20 ms packets,
// PCM transcoding, a `wss` upstream like nginx's TLS leg, and while autocannon hits /metrics and
// /v1/usage on the admin port). Each session of the headline legs lasts from its start in the ramp to
// the end of the hold, minutes, with one set-up; the churn legs keep 9 s sessions (a new one follows
// each) so set-up cost shows.
// Writes bench/results/load.json and load.md (load-full.* with --full).
// Run: npm run bench -- load  (quick: 300 sessions)   npm run bench -- load --full  (1,500)
// Overrides: BENCH_SESSIONS, BENCH_RAMP_S, BENCH_HOLD_S, BENCH_WORKERS, BENCH_ONLY (legs),
// BENCH_GATEWAY_ARGS (node flags for the gateway, e.g. --cpu-prof).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromeWebm, longChromeWebm, opus20Webm, pcmLoop } from './lib/audio.js';
import { drive, type Audio, type Load } from './lib/drive.js';
import {
  buildGateway,
  ensureTools,
  makeCert,
  startGateway,
  startNaive,
  startNginx,
  startUwsRelay,
  startUpstream,
  type Peer,
} from './lib/peers.js';
import { hitHttp } from './lib/http.js';
import { treeRss } from './lib/proc.js';
import { report, type Leg } from './lib/report.js';

process.env.LOG_LEVEL = 'silent';

const full = process.argv.includes('--full');
const env = (k: string, d: number) => Number(process.env[k] ?? d);
const load: Load = {
  sessions: env('BENCH_SESSIONS', full ? 1500 : 300),
  workers: env('BENCH_WORKERS', full ? 4 : 3),
  rampS: env('BENCH_RAMP_S', full ? 30 : 5),
  holdS: env('BENCH_HOLD_S', full ? 150 : 90),
};
/** The churn legs measure as many session-hours as they need to: their sessions last 9 s anyway. */
const churnLoad: Load = { ...load, holdS: Math.min(load.holdS, 30) };
const WARM_UP: Load = { sessions: 3, workers: 1, rampS: 0.5, holdS: 1.5 };
/** Audio for the longest session a leg holds (its ramp and hold), and a margin. */
const sessionS = load.rampS + load.holdS + 10;

ensureTools();
buildGateway();
const dir = mkdtempSync(join(tmpdir(), 'sgw-bench-load-'));
const tls = makeCert(dir);
const upstream = await startUpstream(tls);
const query = `?tenant-name=base&token=${encodeURIComponent(`Bearer ${upstream.token}`)}`;
const path = `/audio-bridge/v2/transcribe${query}`;
const audio = longChromeWebm(dir, sessionS);
const churn = chromeWebm();
const opus20 = opus20Webm(dir, sessionS);
const pcm = pcmLoop(sessionS);
const gatewayEnv = (scheme: 'ws' | 'wss') => ({
  UPSTREAM_URL: `${scheme}://127.0.0.1:${scheme === 'wss' ? upstream.tlsPort : upstream.port}/audio-bridge/v2`,
  AUTH_URL: `http://127.0.0.1:${upstream.port}`,
  USAGE_API_TOKEN: 'bench-usage-token',
  // One token plays every browser: its subject may have as many sockets awaiting their config as the ramp opens.
  MAX_UNCONFIGURED_PER_SUBJECT: '0',
  ...(scheme === 'wss' ? { NODE_EXTRA_CA_CERTS: tls.cert } : {}),
});
const nginx = () => startNginx(dir, { port: upstream.port });
const gateway = () => startGateway(dir, gatewayEnv('ws'));

type Plan = { name: string; start: () => Promise<Peer | null>; audio?: Audio; load?: Load; http?: boolean };
const plans: Plan[] = [
  { name: 'direct', start: async () => null },
  { name: 'nginx', start: nginx },
  { name: 'naive ws proxy', start: () => startNaive(upstream.port) },
  { name: 'uws relay (the floor of Node)', start: () => startUwsRelay(upstream.port) },
  { name: 'uws relay keeping audio until finals', start: () => startUwsRelay(upstream.port, true) },
  { name: 'gateway', start: gateway },
  { name: 'nginx, wss upstream', start: () => startNginx(dir, { port: upstream.tlsPort, tls }) },
  { name: 'gateway, wss upstream', start: () => startGateway(dir, gatewayEnv('wss')) },
  { name: 'gateway, 20 ms Opus packets', start: gateway, audio: opus20 },
  { name: 'gateway PCM→Opus', start: gateway, audio: pcm },
  { name: 'gateway + HTTP load', start: gateway, http: true },
  { name: 'nginx, churn (9 s sessions)', start: nginx, audio: churn, load: churnLoad },
  { name: 'gateway, churn (9 s sessions)', start: gateway, audio: churn, load: churnLoad },
  { name: 'direct, again last', start: async () => null },
];

// BENCH_ONLY=gateway,nginx runs only the legs of those names (the direct legs always run); a
// comma followed by a space is part of a name ("gateway, wss upstream").
const only = process.env.BENCH_ONLY?.split(/,(?! )/);
const chosen = only ? plans.filter((p) => p.name.startsWith('direct') || only.includes(p.name)) : plans;
const began = Date.now();
console.log(
  `load: ${load.sessions} sessions, ${load.workers} generator processes, ramp ${load.rampS} s, hold ${load.holdS} s: ` +
    `each session lasts from its start to the end of the hold (churn legs: ${churn.mediaEnds.at(-1)!.toFixed(1)} s sessions, hold ${churnLoad.holdS} s)`,
);
const legs: Leg[] = [];
try {
  for (const plan of chosen) {
    const peer = await plan.start();
    await new Promise((r) => setTimeout(r, 1000)); // settle before the idle reading
    const idleRssBytes = peer ? treeRss(peer.pid) : 0;
    const url = `ws://127.0.0.1:${peer?.port ?? upstream.port}${path}`;
    const legAudio = plan.audio ?? audio;
    const legLoad = plan.load ?? load;
    await drive(url, legAudio, WARM_UP, null); // first-session costs (token keys, lazy modules) stay out of the numbers
    const during = plan.http ? (from: number, to: number) => hitHttp(peer!.adminPort!, from, to) : undefined;
    const result = await drive(url, legAudio, legLoad, peer?.pid ?? null, during, peer?.adminPort);
    await peer?.stop();
    legs.push({ name: plan.name, ...result, idleRssBytes, load: legLoad });
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
