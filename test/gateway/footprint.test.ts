// Idle footprint: a gateway with a real upstream configured never loads the embedded emulator, one
// without REDIS_URL never loads ioredis, and none loads the transcoding libraries before a stream
// needs them (memory they would hold for nothing), nor imports node:http as an ES module (its
// namespace evaluates http's lazy exports, which load Node's bundled undici: about 14 MB). The gateway runs as its own process (`npm
// start`'s command) with a resolve hook and a require hook that write down every module it loads.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'vitest';
import { freePort } from '../support/ports.js';
import { delay } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sgw-footprint-'));
const hooks = join(dir, 'hooks.mjs');
const register = join(dir, 'register.mjs');
writeFileSync(
  hooks,
  `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.SGW_MODULE_LOG, r.url + '\\n');
  return r;
}
`,
);
// import goes through the resolve hook (on the loader thread); require (CommonJS, createRequire) does not.
writeFileSync(
  register,
  `import { appendFileSync } from 'node:fs';
import Module, { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(hooks).href)});
const load = Module._load;
Module._load = function (request, ...rest) {
  appendFileSync(process.env.SGW_MODULE_LOG, 'require:' + request + '\\n');
  return load.call(this, request, ...rest);
};
`,
);

/** The modules a gateway started with `env` loaded by the time it was ready. */
async function modulesLoaded(name: string, env: Record<string, string>): Promise<string[]> {
  const log = join(dir, `${name}.log`);
  writeFileSync(log, '');
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', register, 'src/main.ts'], {
    env: {
      ...process.env,
      ...env,
      SGW_MODULE_LOG: log,
      PORT: String(port),
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      USAGE_JOURNAL_DIR: join(dir, `journal-${name}`),
      REDIS_URL: '',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    for (let i = 0; ; i++) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      assert.ok(i < 300 && child.exitCode === null, 'the gateway did not become ready');
      await delay(100);
    }
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

const emulatorModules = (urls: string[]) => urls.filter((u) => u.includes('/src/emulator/'));
const redisModules = (urls: string[]) => urls.filter((u) => u.includes('/node_modules/ioredis/'));
const transcoders = (urls: string[]) => urls.filter((u) => /@discordjs\/opus|libsamplerate/.test(u));
const httpImports = (urls: string[]) => urls.filter((u) => u === 'node:http' || u === 'node:https');

describe('idle footprint', () => {
  it('with UPSTREAM_URL the emulator is never loaded, nor ioredis without REDIS_URL, nor a transcoder before a stream; without UPSTREAM_URL the emulator is', async () => {
    const upstream = { UPSTREAM_URL: 'ws://127.0.0.1:9/audio-bridge/v2', AUTH_URL: 'http://127.0.0.1:9' };
    const real = await modulesLoaded('upstream', upstream);
    assert.ok(
      real.some((u) => u.includes('/src/gateway.')),
      'the hook saw the gateway load',
    );
    assert.deepEqual(emulatorModules(real), []);
    assert.deepEqual(redisModules(real), [], 'no REDIS_URL: ioredis is not loaded');
    assert.deepEqual(transcoders(real), [], 'no stream yet: no Opus encoder nor resampler');
    assert.deepEqual(httpImports(real), [], 'no ES import of node:http (jose by subpath, not its index)');
    assert.ok(
      real.some((u) => u.startsWith('require:')),
      'the require hook saw CommonJS loads',
    );
    const embedded = await modulesLoaded('emulator', { EMULATOR_PORT: String(await freePort()) });
    assert.notDeepEqual(emulatorModules(embedded), [], 'with no upstream the emulator is loaded (the hook sees it)');
    assert.deepEqual(httpImports(embedded), [], 'the emulator takes node:http as its CommonJS object');
  }, 60_000);
});
