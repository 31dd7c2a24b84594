// The processes of the load benchmark: the upstream (emulator + TLS terminator), and the proxies
// under test, each its own process tree: nginx (Debian's, foreground, generated config), the naive
// `ws` proxy, the bare uWS relay on the gateway's own upstream client, and the gateway as production
// starts it (the build, run by package.json's start:prod).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const lib = fileURLToPath(new URL('.', import.meta.url));

export interface Peer {
  name: string;
  pid: number;
  port: number;
  /** the gateway's admin port (/metrics, /v1/*); none for the other peers */
  adminPort?: number;
  stop(): Promise<void>;
}

/** nginx and openssl from Debian: installed when root (as npm test does), else the exact command. */
export function ensureTools(): void {
  const missing = [
    ['nginx', '/usr/sbin/nginx'],
    ['openssl', '/usr/bin/openssl'],
  ]
    .filter(([, p]) => spawnSync(p, ['-v']).error)
    .map(([n]) => n);
  if (!missing.length) return;
  const cmd = `apt-get update && apt-get install -y ${missing.join(' ')}`;
  if (process.getuid?.() !== 0)
    throw new Error(`missing ${missing.join(', ')}. Run: sudo ${cmd.replace('&& apt-get', '&& sudo apt-get')}`);
  console.log(`bench: installing ${missing.join(' ')} (apt-get)`);
  const r = spawnSync('sh', ['-c', cmd], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (r.status !== 0) throw new Error(`${cmd} failed`);
}

/** A self-signed certificate for 127.0.0.1 (IP SAN for Node) and localhost (the name nginx checks). */
export function makeCert(dir: string): { cert: string; key: string } {
  const cert = join(dir, 'upstream.crt');
  const key = join(dir, 'upstream.key');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  if (r.status !== 0) throw new Error('openssl could not make the test certificate');
  return { cert, key };
}

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

function firstJsonLine<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start`)), 20_000);
    child.stdout!.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      resolve(JSON.parse(buf.slice(0, nl)));
    });
    child.once('exit', (code) => reject(new Error(`${what} exited (${code})`)));
  });
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill('SIGTERM');
    });
}

export async function startUpstream(tls: { cert: string; key: string }) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(lib, 'upstream.ts')], {
    cwd: repo,
    env: { ...process.env, TLS_CERT: tls.cert, TLS_KEY: tls.key },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const info = await firstJsonLine(child, 'upstream');
  return { ...(info as { port: number; tlsPort: number; token: string }), pid: child.pid!, stop: stopper(child) };
}

/** A plain-JavaScript peer of this folder: `UPSTREAM` is where it connects, its first stdout line its port. */
async function startScriptPeer(script: string, name: string, upstream: string, env = {}): Promise<Peer> {
  const child = spawn(process.execPath, [join(lib, script)], {
    cwd: repo,
    env: { ...process.env, ...env, UPSTREAM: upstream },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { port } = await firstJsonLine<{ port: number }>(child, name);
  return { name, pid: child.pid!, port, stop: stopper(child) };
}

export const startNaive = (upstreamPort: number) =>
  startScriptPeer('naive-proxy.mjs', 'naive proxy', `ws://127.0.0.1:${upstreamPort}`);

/** The gateway's two sockets with nothing between them (uws-relay.mjs): run after buildGateway.
 *  `keep`: it also keeps each audio frame until the second final after it, as the replay does. */
export const startUwsRelay = (upstreamPort: number, keep = false) =>
  startScriptPeer(
    'uws-relay.mjs',
    'uws relay',
    `ws://127.0.0.1:${upstreamPort}/audio-bridge/v2`,
    keep ? { KEEP: 'finals' } : {},
  );

/** nginx in the foreground with one worker (one core, like one gateway process), upstream over ws or wss. */
export async function startNginx(dir: string, upstream: { port: number; tls?: { cert: string } }): Promise<Peer> {
  const port = await freePort();
  const prefix = join(dir, `nginx-${port}`);
  mkdirSync(prefix, { recursive: true });
  const target = upstream.tls
    ? `proxy_pass https://127.0.0.1:${upstream.port};\n      proxy_ssl_verify on; proxy_ssl_trusted_certificate ${upstream.tls.cert};\n` +
      '      proxy_ssl_name localhost; proxy_ssl_server_name on; proxy_ssl_session_reuse on;'
    : `proxy_pass http://127.0.0.1:${upstream.port};`;
  writeFileSync(
    join(prefix, 'nginx.conf'),
    `worker_processes 1;
worker_rlimit_nofile 16384;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${prefix}/tmp; proxy_temp_path ${prefix}/tmp; fastcgi_temp_path ${prefix}/tmp;
  uwsgi_temp_path ${prefix}/tmp; scgi_temp_path ${prefix}/tmp;
  server {
    listen 127.0.0.1:${port};
    location / {
      ${target}
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 300s;
    }
  }
}
`,
  );
  const child = spawn(
    '/usr/sbin/nginx',
    ['-p', prefix, '-e', join(prefix, 'error.log'), '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  await waitHttp(port, '/', child, 'nginx');
  return { name: 'nginx', pid: child.pid!, port, stop: stopper(child) };
}

/**
 * `npm run build` once per run: the gateway legs run the compiled dist/, as production does. tsc
 * emits despite type errors, so a working tree mid-edit is still measured, with the errors shown.
 */
export function buildGateway(): void {
  const r = spawnSync('npm', ['run', '--silent', 'build'], { cwd: repo, encoding: 'utf8' });
  if (r.status === 0) return;
  if (r.error || !existsSync(join(repo, 'dist/src/main.js')))
    throw new Error(`npm run build failed:\n${r.stdout}${r.stderr}`);
  console.log(
    `bench: npm run build reported type errors (the output was emitted and is measured):\n${r.stdout}`.trimEnd(),
  );
}

/** package.json's start:prod ("exec node [flags] dist/src/main.js"), so node flags set there apply here too. */
function prodCommand(): string[] {
  const script: string = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')).scripts['start:prod'];
  const [node, ...args] = script.replace(/^exec /, '').split(/\s+/);
  if (node !== 'node') throw new Error(`start:prod does not run node: ${script}`);
  return args;
}

export async function startGateway(dir: string, env: Record<string, string>): Promise<Peer> {
  const port = await freePort();
  let adminPort = await freePort();
  while (adminPort === port) adminPort = await freePort();
  const { REDIS_URL: _redis, ...inherited } = process.env;
  const profiling = process.env.BENCH_GATEWAY_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...profiling, ...prodCommand()], {
    cwd: repo,
    env: {
      ...inherited,
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      HOST: '127.0.0.1',
      PACE: '1',
      LOG_LEVEL: 'warn',
      USAGE_JOURNAL_DIR: join(dir, `journal-${port}`),
      DRAIN_SECONDS: '1',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stop = stopper(child);
  const said = quietStderr(child);
  await waitHttp(port, '/readyz', child, 'gateway');
  return { name: 'gateway', pid: child.pid!, port, adminPort, stop: () => stop().then(said) };
}

/** Each distinct stderr line once, with how often it came, when the process is stopped. */
function quietStderr(child: ChildProcess): () => void {
  const lines = new Map<string, number>();
  let rest = '';
  child.stderr!.on('data', (d) => {
    const parts = (rest + d).split('\n');
    rest = parts.pop()!.slice(0, 1000);
    for (const l of parts) if (lines.size < 50 || lines.has(l)) lines.set(l, (lines.get(l) ?? 0) + 1);
  });
  return () => {
    for (const [l, n] of lines) console.log(`    gateway stderr (${n}×): ${l.slice(0, 200)}`);
  };
}

async function waitHttp(port: number, path: string, child: ChildProcess, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode})`);
    const ok = await fetch(`http://127.0.0.1:${port}${path}`).then(
      (r) => r.status < 500,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not answer on port ${port}`);
}
