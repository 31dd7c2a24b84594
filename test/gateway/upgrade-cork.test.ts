// Sockets opened with a token verified a moment ago are upgraded inside uWS's own cork (the gate
// does nothing asynchronous for them): none is dropped, and uWS's stderr warning about uncorked
// upgrades comes only for a token's first socket, not for every socket.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { openClient } from '../support/stack.js';
import { emulatorToken } from '../support/gateway-process.js';
import { delay } from '../support/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WARNING = 'Warning: uWS.HttpResponse writes must be made from within a corked callback';
const BURSTS = 20;
const PER_BURST = 50;

describe('upgrades of a token verified a moment ago', () => {
  let child: ChildProcess;
  let out = '';
  let port = 0;
  let authBase = '';

  beforeAll(async () => {
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Bursts of 50 sockets of one token, configured after they open: no bound on sockets without a config.
      env: {
        ...process.env,
        PORT: '0',
        ADMIN_PORT: '0',
        HOST: '127.0.0.1',
        EMULATOR_PORT: '0',
        // uWS's warning is logged (as a JSON line) at debug: telemetry/stderr.ts.
        LOG_LEVEL: 'debug',
        USAGE_JOURNAL_DIR: mkdtempSync(join(tmpdir(), 'sgw-cork-')),
        MAX_UNCONFIGURED_PER_TOKEN: '0',
        MAX_UNCONFIGURED_PER_SUBJECT: '0',
      },
    });
    child.stdout!.on('data', (b: Buffer) => (out += b));
    child.stderr!.on('data', (b: Buffer) => (out += b));
    for (let i = 0; i < 300 && !(port && authBase); i++) {
      await delay(100);
      port = Number(/listening on http:\/\/localhost:(\d+)/.exec(out)?.[1] ?? 0);
      authBase = /EMULATOR on (http:\/\/[\d.:]+)/.exec(out)?.[1] ?? '';
    }
    if (!port || !authBase) throw new Error(`the gateway did not come up:\n${out}`);
  }, 40_000);
  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it(`${BURSTS * PER_BURST} sockets in bursts of ${PER_BURST}: every one configured, none dropped, one uWS warning`, async () => {
    const token = await emulatorToken(authBase);
    const url = `ws://127.0.0.1:${port}/audio-bridge/v2/transcribe?${new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` })}`;
    const session = async () => {
      const c = await openClient(url);
      c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
      await c.next('CONFIG_ACCEPTED');
      c.sendJson({ type: 'end' });
      return (await c.closed).code;
    };
    assert.equal(await session(), 1000, "the token's first socket");
    for (let b = 0; b < BURSTS; b++) {
      const codes = await Promise.all(Array.from({ length: PER_BURST }, session));
      assert.deepEqual(
        codes.filter((c) => c !== 1000),
        [],
        `burst ${b}: every session ended normally`,
      );
    }
    const warnings = out.split(WARNING).length - 1;
    assert.ok(warnings <= 1, `uWS warned ${warnings} times for ${BURSTS * PER_BURST + 1} sockets of one token`);
  }, 120_000);
});
