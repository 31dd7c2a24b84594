// Settings as an operator gets them wrong: the process stops with exit code 1 and one line on
// stderr that names the variable and what it accepts (never the value: some hold secrets),
// without a stack trace; valid values start the gateway.
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'vitest';
import { tempDir } from '../support/usage.js';
import { until } from '../support/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const started = new Set<ChildProcess>();

/** The gateway as `npm start` runs it, without npm's own lines around its output. */
function gateway(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      EMULATOR_PORT: '0',
      USAGE_JOURNAL_DIR: tempDir(),
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  started.add(child);
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (b: Buffer) => (out.stdout += b));
  child.stderr.on('data', (b: Buffer) => (out.stderr += b));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  // On a setting it should have refused, the gateway runs on; the answer is then this string.
  const refused = Promise.race([exited, delay(15_000, 'still running', { ref: false })]);
  return { child, out, exited, refused };
}

describe('settings are validated before anything starts', () => {
  // A gateway that accepted a bad setting keeps running; it must not outlive its test.
  afterEach(() => {
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    started.clear();
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    [
      'LOG_LEVEL=verbose',
      { LOG_LEVEL: 'verbose' },
      /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/,
    ],
    ['PORT above 65535', { PORT: '70000' }, /PORT must be an integer from 0 to 65535/],
    ['ADMIN_PORT above 65535', { ADMIN_PORT: '70000' }, /ADMIN_PORT must be an integer from 0 to 65535/],
    ['ADMIN_PORT the same as PORT', { PORT: '18080', ADMIN_PORT: '18080' }, /ADMIN_PORT is the same as PORT/],
    ['PACE not a number', { PACE: 'fast' }, /PACE must be a number from 1 to 1000/],
    [
      'UPSTREAM_URL over http',
      { UPSTREAM_URL: 'https://api.example.org/audio-bridge/v2', AUTH_URL: 'https://auth.example.org' },
      /UPSTREAM_URL must be a ws or wss URL/,
    ],
    [
      'REDIS_URL with a password and the wrong scheme',
      { REDIS_URL: 'http://:hunter2-secret@redis:6379' },
      /REDIS_URL must be a redis or rediss URL/,
    ],
    [
      'AUTH_URL without UPSTREAM_URL',
      { AUTH_URL: 'https://auth.example.org' },
      /UPSTREAM_URL is unset: set both UPSTREAM_URL and AUTH_URL/,
    ],
    // Both would start and then never match a request: browsers send Origin with its scheme; a bearer token has no whitespace.
    [
      'ALLOWED_ORIGINS without a scheme',
      { ALLOWED_ORIGINS: 'https://app.example.org,hunter2-secret.example.org' },
      /ALLOWED_ORIGINS must be \* or comma-separated origins with their scheme/,
    ],
    [
      'USAGE_API_TOKEN with a trailing newline',
      { USAGE_API_TOKEN: 'hunter2-secret\n' },
      /USAGE_API_TOKEN must contain no whitespace/,
    ],
    [
      'USAGE_API_TOKEN with a space inside',
      { USAGE_API_TOKEN: 'hunter2 secret' },
      /USAGE_API_TOKEN must contain no whitespace/,
    ],
  ];
  for (const [label, env, message] of bad) {
    it(`${label}: exit 1 and one line naming it, no stack trace`, async () => {
      const g = gateway(env);
      assert.equal(await g.refused, 1, `stderr: ${g.out.stderr}`);
      const lines = g.out.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, `one line on stderr, got:\n${g.out.stderr}`);
      const line = JSON.parse(lines[0]) as { level: string; msg: string };
      assert.equal(line.level, 'fatal', 'a JSON line, as every line the gateway writes');
      assert.match(line.msg, /^speech-gateway failed to start: invalid configuration: /);
      assert.match(line.msg, message);
      assert.doesNotMatch(g.out.stderr + g.out.stdout, /hunter2|\n\s+at /, 'no value echoed, no stack trace');
    });
  }

  it('several bad settings are named together on the one line', async () => {
    const g = gateway({ LOG_LEVEL: 'verbose', CHUNK_MS: '0' });
    assert.equal(await g.refused, 1);
    assert.match(g.out.stderr, /^[^\n]*\n$/, 'one line');
    assert.match(
      (JSON.parse(g.out.stderr) as { msg: string }).msg,
      /LOG_LEVEL must be one of [^\n]*; CHUNK_MS must be an integer from 20 to 1000$/,
    );
  });

  it('valid non-default values start the gateway, at the level asked for', async () => {
    const g = gateway({
      LOG_LEVEL: 'warn',
      PACE: '1.5',
      CHUNK_MS: '500',
      DRAIN_SECONDS: '0',
      ALLOW_UWS_FALLBACK: '0',
      ALLOWED_ORIGINS: 'https://app.example.org, http://localhost:3000/',
      USAGE_API_TOKEN: 'ops-token_1.2-3',
      MAX_UNCONFIGURED_PER_SUBJECT: '25',
    });
    try {
      await until(
        () => /speech-gateway is listening on/.test(g.out.stdout) || g.child.exitCode !== null,
        'the gateway to start',
      );
      assert.match(g.out.stdout, /speech-gateway is listening on http:\/\/localhost:\d+/, g.out.stderr);
      assert.doesNotMatch(g.out.stdout, /"level":"info"/, 'no info lines at LOG_LEVEL=warn');
      // Log lines as pipelines and auditors read them: the level's name, an ISO-8601 time.
      const lines = g.out.stdout.split('\n').filter((l) => l.startsWith('{'));
      assert.ok(lines.length > 0, `JSON log lines (the warning that no Redis is set): ${g.out.stdout}`);
      for (const line of lines) {
        const { level, time } = JSON.parse(line) as { level: unknown; time: unknown };
        assert.ok(level === 'warn' || level === 'error', `a level name: ${line}`);
        assert.match(String(time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, `an ISO-8601 time: ${line}`);
      }
      assert.equal(g.out.stderr, '');
    } finally {
      g.child.kill('SIGTERM');
    }
    assert.equal(await g.exited, 0);
  });
});
