// One production command: the image's CMD is package.json's start:prod (which the load benchmark
// runs), node flags included, so what is measured is what ships. Run as production runs it (the
// build, an upstream, Redis and a tenant cap, so every socket is accepted after an await and
// uWebSockets.js has its stderr warning to print; stderr a FIFO, as container runtimes give it),
// its output is JSON lines only: none in plain
// text on stderr, and every stdout line a JSON object with an ISO-8601 time and a level name.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import { freePort } from '../support/ports.js';
import { endpointPath, openClient } from '../support/stack.js';
import { startRedis } from '../usage/redis.js';
import { execForm, parseDockerfile } from './dockerfile.js';
import { delay } from '../support/wait.js';

const root = new URL('../../', import.meta.url);
const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** package.json's start:prod as node's arguments ("exec node [flags] dist/src/main.js"). */
function prodArgs(): string[] {
  const script: string = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).scripts['start:prod'];
  const [node, ...args] = script.replace(/^exec /, '').split(/\s+/);
  assert.equal(node, 'node', script);
  return args;
}

/** A child's stderr as a container runtime gives it (Docker and containerd: a FIFO), read here. */
function containerStderr(): { fd: number; reader: Socket; spawned(): void } {
  const fifo = join(mkdtempSync(join(tmpdir(), 'sgw-stderr-')), 'stderr');
  execFileSync('mkfifo', [fifo]);
  const reader = new Socket({ fd: openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK), writable: false });
  const fd = openSync(fifo, constants.O_WRONLY);
  return { fd, reader, spawned: () => closeSync(fd) };
}

/** The lines of `text` that are not a JSON object with an ISO time and either a level name (a log line)
 *  or the audit stream's marker (an audit event). */
function notJsonLogLines(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .filter((l) => {
      try {
        const o = JSON.parse(l) as { time?: unknown; level?: unknown; stream?: unknown };
        const marked = LEVELS.has(String(o.level)) || o.stream === 'audit';
        return !(typeof o.time === 'string' && ISO_TIME.test(o.time) && marked);
      } catch {
        return true;
      }
    });
}

describe('the production command', () => {
  it('the Dockerfile CMD runs exactly start:prod', () => {
    const cmd = parseDockerfile(readFileSync(new URL('Dockerfile', root), 'utf8'))
      .filter((i) => i.keyword === 'CMD')
      .at(-1);
    const startProd: string = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).scripts['start:prod'];
    assert.equal(`exec ${execForm(cmd?.args, 'CMD').join(' ')}`, startProd);
  });

  it('its output is JSON lines only: nothing plain on stderr, every stdout line JSON with an ISO time and a level', async () => {
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: fileURLToPath(root), stdio: 'ignore' });
    const [emulator, redis, port] = await Promise.all([startEmulator(), startRedis(), freePort()]);
    const stderr = containerStderr();
    const child = spawn(process.execPath, prodArgs(), {
      cwd: fileURLToPath(root),
      env: {
        ...process.env,
        LOG_LEVEL: 'debug', // the level uWS's routed warning is logged at
        PORT: String(port),
        HOST: '127.0.0.1',
        UPSTREAM_URL: emulator.wsBase,
        AUTH_URL: emulator.authBase,
        REDIS_URL: redis.url,
        MAX_SESSIONS_PER_TENANT: '5',
        USAGE_JOURNAL_DIR: mkdtempSync(join(tmpdir(), 'sgw-prod-')),
        DRAIN_SECONDS: '1',
      },
      stdio: ['ignore', 'pipe', stderr.fd],
    });
    stderr.spawned();
    const out = { stdout: '', stderr: '' };
    child.stdout!.on('data', (b: Buffer) => (out.stdout += b));
    stderr.reader.on('data', (b: Buffer) => (out.stderr += b));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      for (let i = 0; i < 200 && !out.stdout.includes('listening on'); i++) await delay(50);
      assert.match(out.stdout, /listening on/, `the gateway did not start:\n${out.stdout}${out.stderr}`);
      // Two sessions, each accepted after the tenant cap asked Redis: uWS's warning case.
      for (let i = 0; i < 2; i++) {
        const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
        const query = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
        const c = await openClient(`ws://127.0.0.1:${port}${endpointPath('transcribe')}?${query}`);
        c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
        await c.next('CONFIG_ACCEPTED');
        c.sendJson({ type: 'end' });
        assert.equal((await c.closed).code, 1000);
      }
      child.kill('SIGTERM');
      assert.equal(await exited, 0, out.stdout + out.stderr);
      await delay(200); // the FIFO's last bytes
    } finally {
      child.kill('SIGKILL');
      stderr.reader.destroy();
      await Promise.all([emulator.close(), redis.stop()]);
    }
    assert.deepEqual(notJsonLogLines(out.stderr), [], 'plain-text lines on stderr');
    assert.deepEqual(notJsonLogLines(out.stdout), [], 'stdout lines that are not JSON log lines');
    assert.match(out.stdout, /"event":"session_end"/, 'the sessions were logged');
    assert.match(out.stdout, /"event":"native_stderr"[^\n]*corked callback/, "uWS's warning, as a JSON log line");
  }, 120_000);
});
