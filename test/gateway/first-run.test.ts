// What a new user does first, as a real process: `npm start`'s entry point with the embedded
// emulator, a development token from the printed command, a file streamed with the CLI client.
// The whole run's output (at LOG_LEVEL=trace) must not contain a token.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { refusal } from '../support/stack.js';
import { waitForOutput } from '../support/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

function run(cmd: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c));
    p.stderr.on('data', (c: Buffer) => (out += c));
    p.on('exit', (code) => resolve({ code, out }));
  });
}

describe('first run: npm start, a dev token, npm run stream', () => {
  let gateway: ChildProcess;
  let output = '';
  let port = 0;
  let authBase = '';
  beforeAll(async () => {
    gateway = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: root,
      env: { ...process.env, PORT: '0', ADMIN_PORT: '0', EMULATOR_PORT: '0', LOG_LEVEL: 'trace', PACE: '8' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gateway.stdout!.on('data', (c: Buffer) => (output += c));
    gateway.stderr!.on('data', (c: Buffer) => (output += c));
    port = Number((await waitForOutput(() => output, /listening on http:\/\/localhost:(\d+)/, 20_000))[1]);
    authBase = (
      await waitForOutput(
        () => output,
        /(http:\/\/127\.0\.0\.1:\d+)\/realms\/base\/protocol\/openid-connect\/token/,
        5000,
      )
    )[1];
  });
  afterAll(() => {
    gateway.kill('SIGKILL');
  });

  it('prints how to get a development token, and that token streams a file through the gateway', async () => {
    assert.match(output, /client_id=dev/);
    assert.match(output, /EMULATOR/);
    const res = await fetch(`${authBase}/realms/base/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'dev',
        client_secret: 'dev-secret',
        scope: 'openid transcribe streams',
      }),
    });
    const { access_token: token } = (await res.json()) as { access_token: string };
    const cli = await run(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/stream.ts',
        'test/fixtures/dictation.ogg',
        '--fast',
        '--gateway',
        `ws://127.0.0.1:${port}`,
        '--token',
        token,
      ],
      {},
    );
    assert.equal(cli.code, 0, cli.out);
    assert.match(cli.out, /CONFIG_ACCEPTED/);
    assert.match(cli.out, /transcript final/);
    assert.match(cli.out, /"type":"usage"/);
    assert.match(cli.out, /"type":"ended"/);

    // A refused upgrade with a forged token, and one offering the token as a protocol.
    const forged = token.slice(0, -8) + 'AAAAAAAA';
    const r = await refusal(
      `ws://127.0.0.1:${port}/audio-bridge/v2/transcribe?tenant-name=base&token=${encodeURIComponent(`Bearer ${forged}`)}`,
    );
    assert.equal(r.status, 401);

    gateway.kill('SIGTERM');
    await new Promise((resolve) => gateway.once('exit', resolve));
    // (dev-secret is the emulator's published development credential: printed on purpose.)
    const secretParts = [token, forged, token.split('.')[2], forged.split('.')[2]];
    for (const s of secretParts)
      assert.ok(!output.includes(s), `the gateway's output contains a secret (${s.slice(0, 6)}…)`);
    assert.match(output, /"event":"session_end"/, 'the run was logged (so the check above saw real logs)');
  });
});

describe('uWS native build guard', () => {
  it('refuses to start on the pure-JS fallback unless ALLOW_UWS_FALLBACK is set', async () => {
    const standIn = ['--import', 'tsx', '--import', './test/support/uws-js-only.mjs', 'src/main.ts'];
    const r = await run(process.execPath, standIn, { PORT: '0', ADMIN_PORT: '0', EMULATOR_PORT: '0' });
    assert.notEqual(r.code, 0);
    assert.match(r.out, /native binary did not load/);
    const allowed = spawn(process.execPath, standIn, {
      cwd: root,
      env: { ...process.env, PORT: '0', ADMIN_PORT: '0', EMULATOR_PORT: '0', ALLOW_UWS_FALLBACK: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    allowed.stdout!.on('data', (c: Buffer) => (out += c));
    allowed.stderr!.on('data', (c: Buffer) => (out += c));
    try {
      await waitForOutput(() => out, /listening on http:\/\/localhost:\d+/, 20_000);
    } finally {
      allowed.kill('SIGKILL');
    }
  });
});
