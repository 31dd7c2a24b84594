// The Dockerfile's own recipe on the suite's runtime, the image's own base (Debian 13, Node 24; no
// container engine or base image here):
// a copy of the repository as the build context (minus .dockerignore), the RUN lines (npm ci, build,
// prune) and COPY lines run stage by stage (see dockerfile.ts; the apt-get lines are skipped: they
// install python3/make/g++ and tini, which the runtime has), then the ENTRYPOINT + CMD in the runtime
// stage's WORKDIR with the embedded emulator, and a session through it. Slow (npm ci, the Opus
// addon built from source): one run, a generous timeout.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture, randomChunks } from '../support/fixtures.js';
import { openClient } from '../support/stack.js';
import { waitForOutput } from '../support/wait.js';
import { dockerignore, execForm, runRecipe, type Stage } from './dockerfile.js';
import { emulatorToken } from '../support/gateway-process.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const RECIPE_MS = 15 * 60_000;

/** The build context: the repository's files (tracked and new, not git-ignored) minus .dockerignore. */
function buildContext(dir: string): void {
  const ignored = dockerignore(readFileSync(join(root, '.dockerignore'), 'utf8'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
  });
  for (const f of files.split('\0')) {
    if (f === '' || ignored(f) || !existsSync(join(root, f))) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(join(root, f), join(dir, f));
  }
}

describe('the Dockerfile recipe builds an image directory that serves a session', () => {
  const work = mkdtempSync(join(tmpdir(), 'sgw-docker-'));
  const journal = join(work, 'journal'); // the image's USAGE_JOURNAL_DIR is a volume; here a temp dir
  let runtime: Stage;
  let stagesRun: Stage[] = [];
  let gateway: ChildProcess | undefined;
  let output = '';
  let port = 0;
  let authBase = '';

  beforeAll(async () => {
    buildContext(join(work, 'context'));
    const stages = await runRecipe(
      readFileSync(join(root, 'Dockerfile'), 'utf8'),
      join(work, 'context'),
      work,
      () => {},
    );
    stagesRun = stages;
    runtime = stages.at(-1)!;
    const command = [...execForm(runtime.meta.ENTRYPOINT, 'ENTRYPOINT'), ...execForm(runtime.meta.CMD, 'CMD')];
    gateway = spawn(command[0], command.slice(1), {
      cwd: join(runtime.root, runtime.workdir),
      env: {
        PATH: process.env.PATH,
        ...runtime.env,
        PORT: '0',
        ADMIN_PORT: '0',
        EMULATOR_PORT: '0',
        HOST: '127.0.0.1',
        USAGE_JOURNAL_DIR: journal,
        PACE: '20',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gateway.stdout!.on('data', (c: Buffer) => (output += c));
    gateway.stderr!.on('data', (c: Buffer) => (output += c));
    port = Number((await waitForOutput(() => output, /listening on http:\/\/localhost:(\d+)/, 30_000, gateway))[1]);
    authBase = (
      await waitForOutput(
        () => output,
        /(http:\/\/127\.0\.0\.1:\d+)\/realms\/base\/protocol\/openid-connect\/token/,
        5000,
        gateway,
      )
    )[1];
  }, RECIPE_MS);
  afterAll(() => {
    gateway?.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });

  it("runs on the stages' base: every FROM is the Node 24 / Debian 13 image this suite runs on", () => {
    const osRelease = readFileSync('/etc/os-release', 'utf8');
    for (const stage of stagesRun) {
      const m = /^node:(\d+)-(\w+)-slim$/.exec(stage.from);
      assert.ok(m, `stage ${stage.name}: base ${stage.from} is not an official node:N-CODENAME-slim image`);
      assert.equal(
        m[1],
        process.versions.node.split('.')[0],
        `stage ${stage.name}: Node ${m[1]} in the image, ${process.version} here`,
      );
      assert.match(
        osRelease,
        new RegExp(`^VERSION_CODENAME=${m[2]}$`, 'm'),
        `stage ${stage.name}: ${m[2]} in the image, not the Debian here`,
      );
    }
    assert.deepEqual(
      stagesRun.map((s) => s.from),
      ['node:24-trixie-slim', 'node:24-trixie-slim'],
    );
  });

  it('the runtime stage holds no dev dependency and runs as a non-root user behind tini', () => {
    for (const dev of ['tsx', 'typescript', 'vitest', '@types/node']) {
      assert.ok(!existsSync(join(runtime.root, runtime.workdir, 'node_modules', dev)), `${dev} is in the image`);
    }
    assert.ok(!existsSync(join(runtime.root, runtime.workdir, 'src')), 'TypeScript sources are in the image');
    assert.match(runtime.meta.USER ?? '', /^[1-9]\d*(:\d+)?$/, 'a numeric non-root USER');
    assert.deepEqual(execForm(runtime.meta.ENTRYPOINT, 'ENTRYPOINT'), ['/usr/bin/tini', '--']);
  });

  it('passes a WAV dictation through (transcoded by the built encoder worker): transcripts, usage, ended', async () => {
    const token = await emulatorToken(authBase);
    const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
    const c = await openClient(`ws://127.0.0.1:${port}/audio-bridge/v2/transcribe?${q}`);
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/wav' } });
    await c.next('CONFIG_ACCEPTED');
    for (const chunk of randomChunks(fixture('dictation-16k.wav'), 11, 32_000)) c.send(chunk);
    c.sendJson({ type: 'end' });
    await c.next('ended', 60_000);
    assert.equal((await c.closed).code, 1000);
    assert.ok(c.types().includes('transcript'), `no transcript; got ${JSON.stringify(c.types())}`);
    assert.ok(c.types().includes('usage'), `no usage; got ${JSON.stringify(c.types())}`);
    assert.doesNotMatch(output, /"level":"(error|fatal)"/, 'the gateway logged an error');
  });

  it('the HEALTHCHECK command passes against it, and SIGTERM through tini drains and exits 0', async () => {
    const hc = /\bCMD\s+(\[.*\])$/.exec(runtime.meta.HEALTHCHECK ?? '')?.[1];
    const probe = execForm(hc, 'HEALTHCHECK CMD');
    const r = spawnSync(probe[0], probe.slice(1), {
      env: { PATH: process.env.PATH, ...runtime.env, PORT: String(port) },
      timeout: 10_000,
    });
    assert.equal(r.status, 0, `healthcheck: ${r.stderr}`);
    const exited = new Promise<number | null>((resolve) => gateway!.once('exit', resolve));
    gateway!.kill('SIGTERM');
    assert.equal(await exited, 0, output.slice(-2000));
    assert.equal(output.match(/"msg":"draining"/g)?.length, 1, 'drained once');
  });
});
