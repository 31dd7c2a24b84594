// Test support: the gateway as a child process (real `node src/main.ts`), for what it reads only at
// start (NODE_EXTRA_CA_CERTS for a Redis that speaks TLS), with the embedded emulator; its ports and
// the emulator's address read from its log. Also one session through it and its ledger rows.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { openClient } from './stack.js';
import { ledgerSessionsAt, type LedgerSession } from './usage-api.js';
import { delay } from './wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface GatewayProcess {
  port: number;
  adminPort: number;
  authBase: string;
  output(): string;
  /** SIGTERM, then SIGKILL after 10 s. */
  stop(): Promise<void>;
  /** SIGKILL at once (a crash: nothing is cleaned up); resolves once it exited. */
  kill(): Promise<void>;
  /** Stops reading its stdout (a log reader that stalls), and reads it again. */
  pauseStdout(): void;
  resumeStdout(): void;
}

/** Starts the gateway with `env` (no Redis settings or CA from this process's environment), its usage
 *  journal in a fresh directory under `dir`. */
export async function startGatewayProcess(dir: string, env: Record<string, string>): Promise<GatewayProcess> {
  const base = { ...process.env };
  for (const name of ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES', 'NODE_EXTRA_CA_CERTS']) delete base[name];
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...base,
      ...{ PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0', LOG_LEVEL: 'info' },
      USAGE_JOURNAL_DIR: mkdtempSync(join(dir, 'journal-')),
      ...env,
    },
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b));
  child.stderr!.on('data', (b: Buffer) => (out += b));
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, delay(10_000)]);
    if (child.exitCode === null) child.kill('SIGKILL');
  };
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  const pauseStdout = () => void child.stdout!.pause();
  const resumeStdout = () => void child.stdout!.resume();
  const g = { port: 0, adminPort: 0, authBase: '', output: () => out, stop, kill, pauseStdout, resumeStdout };
  for (let i = 0; i < 400 && !(g.port && g.authBase); i++) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}):\n${out}`);
    await delay(100);
    const ports = /listening on :(\d+) \(admin: [^)]* on :(\d+)\)/.exec(out);
    g.port = Number(ports?.[1] ?? 0);
    g.adminPort = Number(ports?.[2] ?? 0);
    g.authBase = /EMULATOR on (http:\/\/[\d.:]+)/.exec(out)?.[1] ?? '';
  }
  if (!g.port || !g.authBase) {
    await stop();
    throw new Error(`the gateway did not come up:\n${out}`);
  }
  return g;
}

/** A token of tenant "base" from the embedded emulator at `authBase` (client credentials). */
export async function emulatorToken(authBase: string): Promise<string> {
  const res = await fetch(`${authBase}/realms/base/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
      scope: 'openid transcribe',
    }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** One session of tenant "base" through the gateway: token from the emulator, config, end. */
export async function oneSession(g: GatewayProcess): Promise<void> {
  const token = await emulatorToken(g.authBase);
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const c = await openClient(`ws://127.0.0.1:${g.port}/audio-bridge/v2/transcribe?${q}`);
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
  await c.next('CONFIG_ACCEPTED');
  c.sendJson({ type: 'end' });
  assert.equal((await c.closed).code, 1000);
}

/** Tenant "base"'s ended ledger sessions, waited for (at most 10 s). */
export async function endedSessions(g: GatewayProcess, apiToken: string): Promise<LedgerSession[]> {
  let last: unknown = null;
  for (let i = 0; i < 100; i++) {
    try {
      const rows = (await ledgerSessionsAt(g.adminPort, apiToken, 'base')).filter((r) => r.end !== null);
      if (rows.length > 0) return rows;
      last = 'no ended session';
    } catch (err) {
      last = err;
    }
    await delay(100);
  }
  throw new Error(`the usage API shows no ended session: ${String(last)}\n${g.output()}`);
}
