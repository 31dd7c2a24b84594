// What of the upstream's side reaches a client: only the catalogue's words. Text from the upstream
// that is not a JSON message is not passed on (the client gets the error shape instead), and an
// upstream that cannot be reached is told to the client without its cause (an internal address),
// while the gateway's log has that cause at warn level.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { fixture } from '../support/fixtures.js';
import { freePort } from '../support/ports.js';
import { endpointPath, openClient, startStack, type Stack } from '../support/stack.js';
import { tempDir } from '../support/usage.js';
import { until } from '../support/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ogg = fixture('dictation.ogg');
const CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' };

describe('what of the upstream reaches a client', () => {
  let emulator: Emulator;
  let stack: Stack;
  let gateway: ChildProcess | undefined;
  beforeAll(async () => {
    emulator = await startEmulator();
    stack = await startStack({ PACE: '20' }, { emulator });
  });
  afterAll(async () => {
    gateway?.kill('SIGKILL');
    await stack?.close();
  });

  it('text from the upstream that is not JSON is replaced by the error shape; the session goes on', async () => {
    const leak = 'Internal Server Error at 10.0.3.7:9000 (stack: Foo.bar)';
    emulator.faults.textOnFlush = leak;
    try {
      const c = await stack.connect('transcribe');
      c.sendJson({ type: 'config', configuration: CONFIG });
      await c.next('CONFIG_ACCEPTED');
      for (let off = 0; off < 64_000; off += 8000) c.send(ogg.subarray(off, off + 8000));
      c.sendJson({ type: 'flush' });
      await c.next('flushed', 20_000);
      await c.next('delta_usage');
      const errors = c.messages.filter((m) => m.type === 'error');
      assert.equal(errors.length, 1, `one error in place of the text: ${JSON.stringify(c.types())}`);
      assert.equal(errors[0].error.id, 'UPSTREAM_MESSAGE_INVALID');
      assert.equal(errors[0].error.status, 502);
      assert.doesNotMatch(
        JSON.stringify(c.messages),
        /10\.0\.3\.7|Internal Server Error|Foo\.bar/,
        'nothing of the text reaches the client',
      );
      c.sendJson({ type: 'end' });
      await c.next('ended', 20_000);
      assert.equal((await c.closed).code, 1000, 'the session ended normally');
    } finally {
      emulator.faults.textOnFlush = null;
    }
  });

  it('an unreachable upstream: the client gets the catalogue error without the cause; the log has the cause at warn', async () => {
    const closedPort = await freePort();
    gateway = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PORT: '0',
        ADMIN_PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        USAGE_JOURNAL_DIR: tempDir(),
        UPSTREAM_RECONNECT_ATTEMPTS: '0',
        UPSTREAM_URL: `ws://127.0.0.1:${closedPort}/audio-bridge/v2`,
        AUTH_URL: emulator.authBase,
      },
    });
    let out = '';
    gateway.stdout!.on('data', (b: Buffer) => (out += b));
    gateway.stderr!.on('data', (b: Buffer) => (out += b));
    await until(() => /"port":\d+[^\n]*listening/.test(out) || gateway!.exitCode !== null, 'the gateway to start');
    const port = Number(/"port":(\d+)[^\n]*listening/.exec(out)?.[1]);
    assert.ok(port > 0, out);

    const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
    const c = await openClient(
      `ws://127.0.0.1:${port}${endpointPath('transcribe')}?${new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` })}`,
    );
    c.sendJson({ type: 'config', configuration: CONFIG });
    const error = await c.next('error', 20_000);
    assert.equal((await c.closed).code, 1014);
    assert.equal(error.error.id, 'UPSTREAM_UNAVAILABLE');
    assert.doesNotMatch(
      error.error.details,
      /ECONNREFUSED|127\.0\.0\.1|:\d{2,5}\b/,
      `no internal cause in "${error.error.details}"`,
    );
    assert.match(error.error.details, /speech service/);

    await until(() => /"event":"session_end"/.test(out), 'the session to end');
    const lines = out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; event?: string; cause?: string });
    const cause = lines.find((l) => l.event === 'upstream_lost');
    assert.ok(cause, `a log line with the cause: ${out.slice(-2000)}`);
    assert.equal(cause.level, 'warn', 'at warn level');
    assert.match(cause.cause ?? '', new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}`));
  });
});
