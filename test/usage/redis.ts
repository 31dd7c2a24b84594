// Test helper: a real redis-server on a free port. stop() sends SIGTERM and waits for exit;
// restart() starts it again on the same port. With persist, an append-only file in a temp dir
// keeps the data across stop/restart (a production Redis with persistence).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/ports.js';

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  restart(): Promise<void>;
}

/** redis-server (or a sentinel) with `args`, once its output holds `ready`; its output is in the error if it exits. */
export function launchRedisServer(args: string[], ready = 'Ready to accept connections'): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      if (!out.includes(ready)) return;
      child.stdout!.off('data', onData);
      child.stdout!.resume();
      resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${out.slice(-800)}`)));
    child.once('error', reject);
  });
}

export async function startRedis(opts: { persist?: boolean } = {}): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-redis-'));
  const argsFor = (port: number) => [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--dir',
    dir,
    ...(opts.persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']),
  ];
  // Test files run in parallel: another may take the free port before redis binds it; try another.
  let port = 0;
  let child: ChildProcess | null = null;
  for (let attempt = 1; !child; attempt++) {
    port = await freePort();
    child = await launchRedisServer(argsFor(port)).catch((err: Error) => {
      if (attempt < 5 && /Address already in use/.test(err.message)) return null;
      throw err;
    });
  }
  const args = argsFor(port);
  process.once('exit', () => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      const c = child;
      child = null;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    },
    async restart() {
      if (child) throw new Error('redis is running');
      child = await launchRedisServer(args);
    },
  };
}
