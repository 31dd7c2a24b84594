// What one upstream TLS connection costs the gateway's process, and what sharing one TLS context
// buys: a child process opens N TLS connections (one at a time, each until the server's first byte)
// to a TLS server in another process, either with a context of its own per connection (what
// tls.connect makes when given none) or with one shared context (what the gateway's upstream client
// does). Measured in the child: RSS growth per connection after full collections, and CPU (user +
// system) per connection set-up. Modes alternate over several rounds; medians are reported.
// Run: npm run bench -- tls   Overrides: BENCH_TLS_CONNECTIONS (default 500), BENCH_TLS_ROUNDS (3).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext, createServer, connect, type TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { makeCert } from '../load/lib/peers.js';

type Mode = 'own context per connection' | 'one shared context';
const MODES: Mode[] = ['own context per connection', 'one shared context'];
const N = Number(process.env.BENCH_TLS_CONNECTIONS ?? 500);
const ROUNDS = Number(process.env.BENCH_TLS_ROUNDS ?? 3);
const [role, dir, mode] = process.argv.slice(2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

if (role === 'server') {
  const srv = createServer({
    key: readFileSync(join(dir, 'upstream.key')),
    cert: readFileSync(join(dir, 'upstream.crt')),
  });
  srv.on('secureConnection', (s) => s.write('x'));
  srv.listen(0, '127.0.0.1', () => process.stdout.write(`${(srv.address() as { port: number }).port}\n`));
} else if (role === 'client') {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const port = Number(process.argv[5]);
  const ca = readFileSync(join(dir, 'upstream.crt'));
  const shared = createSecureContext({ ca });
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc();
      await sleep(100);
    }
  };
  await settle();
  const rss0 = process.memoryUsage().rss;
  const cpu0 = process.cpuUsage();
  const open: TLSSocket[] = [];
  for (let i = 0; i < N; i++) {
    const base = { host: '127.0.0.1', port, servername: 'localhost' };
    const s = connect(mode === 'one shared context' ? { ...base, secureContext: shared } : { ...base, ca });
    open.push(s);
    await new Promise((r, j) => s.once('data', r).once('error', j));
  }
  const cpu = process.cpuUsage(cpu0);
  await settle();
  const kb = (process.memoryUsage().rss - rss0) / N / 1024;
  process.stdout.write(JSON.stringify({ kbPerConnection: kb, cpuUsPerConnection: (cpu.user + cpu.system) / N }));
  process.exit(0);
} else {
  const tmp = mkdtempSync(join(tmpdir(), 'sgw-bench-tls-'));
  makeCert(tmp);
  const self = fileURLToPath(import.meta.url);
  const args = (...a: string[]) => ['--import', 'tsx', self, ...a];
  const server = spawn(process.execPath, args('server', tmp), { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = (await new Promise<string>((r) => server.stdout.once('data', (d) => r(String(d))))).trim();
  const runs: Record<Mode, { kbPerConnection: number; cpuUsPerConnection: number }[]> = {
    'own context per connection': [],
    'one shared context': [],
  };
  try {
    for (let round = 0; round < ROUNDS; round++)
      for (const m of MODES) {
        const r = spawnSync(process.execPath, ['--expose-gc', ...args('client', tmp, m, port)], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`client (${m}) failed: ${r.stderr}`);
        runs[m].push(JSON.parse(r.stdout));
      }
  } finally {
    server.kill();
    rmSync(tmp, { recursive: true, force: true });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const rows = MODES.map((m) => ({
    mode: m,
    kbPerConnection: median(runs[m].map((r) => r.kbPerConnection)),
    cpuUsPerConnection: median(runs[m].map((r) => r.cpuUsPerConnection)),
  }));
  const lines = [
    `${N} upstream TLS connections held by one process, median of ${ROUNDS} rounds (modes alternate):`,
    '',
    '| TLS context | KB per connection | CPU µs per connection set-up |',
    '|---|---|---|',
    ...rows.map((r) => `| ${r.mode} | ${r.kbPerConnection.toFixed(1)} | ${r.cpuUsPerConnection.toFixed(0)} |`),
  ];
  console.log(lines.join('\n'));
  const results = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(results, { recursive: true });
  writeFileSync(
    join(results, 'tls-context.json'),
    JSON.stringify(
      { bench: 'tls-context', date: new Date().toISOString(), connections: N, rounds: ROUNDS, rows, runs },
      null,
      2,
    ) + '\n',
  );
}
