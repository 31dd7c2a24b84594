// The browser demo in Debian's real Chromium (playwright-core, fake microphone playing a fixture):
// the page served by a gateway with the embedded emulator gets a token, opens /transcribe from its
// own origin, shows live transcripts, flushes, ends with usage, and resumes after a network drop.
// Without the emulator there is no page.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import { FIXTURES } from '../support/fixtures.js';
import { postDemoToken } from '../support/demo-token.js';
import { metric } from '../support/metrics.js';
import { spawnInNetns } from '../support/netns.js';
import { startStack, type Stack } from '../support/stack.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const FAKE_MIC = join(FIXTURES, 'dictation-16k.wav');
const SCREENSHOT = fileURLToPath(new URL('../../docs/demo.png', import.meta.url));
const WAIT_MS = 20_000;
const DEMO_PEERS = fileURLToPath(new URL('./demo-peers.ts', import.meta.url));
const FORWARDING_PROXY = fileURLToPath(new URL('../support/forwarding-proxy.ts', import.meta.url));
/** A documentation address (RFC 5737), local only in the test's own network namespace. */
const OUTSIDE = '198.51.100.7';

let stack: Stack;
let proxy: TcpProxy;
let browser: Browser;
let http: string;

beforeAll(async () => {
  // All interfaces, so a request from a non-loopback address can be tried too.
  stack = await startStack({ HOST: '0.0.0.0' });
  http = `http://127.0.0.1:${stack.gateway.server.port}`;
  proxy = await startTcpProxy(stack.gateway.server.port);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: false, // the flag below asks for the new headless mode itself
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${FAKE_MIC}`,
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await stack?.close();
});

/** The reverse proxy (support/forwarding-proxy.ts) in a process of its own, in front of `port`. */
async function startForwardingProxy(port: number): Promise<{ port: number; stop(): void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FORWARDING_PROXY], {
    env: { ...process.env, TARGET_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const first = await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next();
  if (first.done) throw new Error(`the proxy exited (${child.exitCode})`);
  return { port: (JSON.parse(first.value as string) as { port: number }).port, stop: () => child.kill() };
}

/** A page with every script error and console error it reports collected (a CSP refusal is one). */
async function openDemo(url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 900, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(url);
  return { page, errors };
}

const finals = (page: Page) => page.locator('#finals li').allTextContents();
const waitForFinals = (page: Page, n: number) =>
  page
    .locator('#finals li')
    .nth(n - 1)
    .waitFor({ timeout: WAIT_MS });
const waitForEvent = (page: Page, text: string) =>
  page.locator('#events li', { hasText: text }).first().waitFor({ timeout: WAIT_MS });

/** Finals' [start-end] in order: one timeline, each second once. */
function assertOneTimeline(lines: string[]): void {
  const spans = lines.map((l) => /^\[(\d+\.\d+)-(\d+\.\d+) s\]/.exec(l)).map((m) => [Number(m![1]), Number(m![2])]);
  spans.forEach(([start], i) =>
    assert.equal(
      start,
      i === 0 ? 0 : spans[i - 1][1],
      `final ${i} starts where the one before ended: ${lines.join(' | ')}`,
    ),
  );
}

describe('browser demo (Chromium, fake microphone)', () => {
  it('streams the microphone: live transcripts, counted in /metrics, flush, end with usage; saves the README screenshot', async () => {
    const { page, errors } = await openDemo(`${http}/`);
    await page.click('#start');
    await waitForFinals(page, 2);
    assert.equal(
      await metric(
        stack.gateway.server.adminPort,
        'speech_gateway_active_sessions{endpoint="transcribe",tenant="base"}',
      ),
      1,
    );
    const upstream = stack.emulator.sessions.at(-1)!;
    assert.equal((upstream.config as { audioFormat: string }).audioFormat, 'audio/webm;codecs=opus');
    assert.equal(
      upstream.audio.subarray(0, 4).toString('hex'),
      '1a45dfa3',
      'the upstream got WebM from its first byte',
    );

    await page.click('#flush');
    await waitForEvent(page, 'flushed');
    await page.locator('#usage', { hasText: 'so far' }).waitFor({ timeout: WAIT_MS });

    await page.click('#end');
    await page.locator('#status', { hasText: /^ended$/ }).waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('#usage').innerText(), /^\d+(\.\d+)?$/, 'final credits shown');
    assert.ok(Number(await page.locator('#usage').innerText()) > 0);
    // The session's transcript coverage at its end: the fixture is speech throughout, and every
    // second of it has its final.
    const coverage = await page.locator('#coverage').innerText();
    const m = /^(\d+)% of ([\d.]+) s of speech transcribed/.exec(coverage);
    assert.ok(m, `coverage shown: ${coverage}`);
    assert.ok(Number(m[1]) >= 90 && Number(m[2]) > 1, coverage);
    assertOneTimeline(await finals(page));
    assert.ok(
      (await metric(
        stack.gateway.server.adminPort,
        'speech_gateway_sessions_total{endpoint="transcribe",outcome="ended",environment="eu"}',
      )) >= 1,
    );
    assert.equal(
      await metric(
        stack.gateway.server.adminPort,
        'speech_gateway_active_sessions{endpoint="transcribe",tenant="base"}',
      ),
      0,
    );
    assert.deepEqual(errors, []);
    await page.locator('#start:enabled').waitFor({ timeout: WAIT_MS }); // the close was seen: Start is offered again
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    await page.close();
  });

  it('resumes its session after a network drop: same session, one timeline', async () => {
    const { page, errors } = await openDemo(`http://127.0.0.1:${proxy.port}/`);
    await page.click('#start');
    await waitForFinals(page, 2);
    const sessionId = await page.locator('#session').innerText();
    const upstreamSessions = stack.emulator.sessions.length;
    proxy.cutAll();
    await waitForEvent(page, 'resumed');
    const before = (await finals(page)).length;
    await waitForFinals(page, before + 2);
    await page.click('#end');
    await page.locator('#status', { hasText: /^ended$/ }).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('#session').innerText(), sessionId);
    assert.equal(stack.emulator.sessions.length, upstreamSessions, 'no new upstream session');
    assertOneTimeline(await finals(page));
    assert.ok((await metric(stack.gateway.server.adminPort, 'speech_gateway_resumes_total{result="resumed"}')) >= 1);
    // The drop itself is the only error the browser reports (a reset socket).
    assert.deepEqual(
      errors.filter((e) => !/WebSocket/.test(e)),
      [],
    );
    await page.close();
  });

  it('End pressed while the connection is down ends the session once it is resumed, with usage', async () => {
    const { page } = await openDemo(`http://127.0.0.1:${proxy.port}/`);
    await page.click('#start');
    await waitForFinals(page, 2);
    const sessionId = await page.locator('#session').innerText();
    proxy.cutAll();
    await page.locator('#status', { hasText: 'reconnecting' }).waitFor({ timeout: WAIT_MS });
    await page.click('#end');
    await page.locator('#status', { hasText: /^ended$/ }).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('#session').innerText(), sessionId);
    assert.ok(Number(await page.locator('#usage').innerText()) > 0, 'final credits shown');
    assertOneTimeline(await finals(page));
    await page.close();
  });

  it('gives the development token to a browser on this machine only: not to another address, nor to 127.0.0.6', async () => {
    // In a network namespace of its own, where OUTSIDE is a local address that is not loopback, so
    // this runs on a machine with no external interface too.
    const child = spawnInNetns(OUTSIDE, process.execPath, ['--import', 'tsx', DEMO_PEERS], {
      env: { ...process.env, DEMO_PEER_ADDRESS: OUTSIDE },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, `the peers' run exited ${code}: ${out}`);
    // Another address; a mesh sidecar's hop (loopback, but not 127.0.0.1); then a browser here on IPv4 and IPv6.
    assert.deepEqual(JSON.parse(out), { other: 404, sidecar: 404, ipv4: 200, ipv6: 200 });
  });

  it('refuses the token to a request a reverse proxy passed on, or one naming another host', async () => {
    const port = stack.gateway.server.port;
    const local = { host: `localhost:${port}` };
    const refused = async (at: number, headers: Record<string, string>, what: string) => {
      const r = await postDemoToken(at, { headers });
      assert.equal(r.status, 404, what);
      assert.equal(r.body.error.id, 'NOT_FOUND', what);
      assert.equal(r.body.type, 'error', 'the shape of every HTTP error outside the upgrade');
    };
    // A real proxy process on this host, passing the request on from 127.0.0.1 with X-Forwarded-For.
    const proxy = await startForwardingProxy(port);
    try {
      await refused(proxy.port, { host: `localhost:${proxy.port}` }, 'through a reverse proxy');
    } finally {
      proxy.stop();
    }
    for (const [name, value] of [
      ['forwarded', 'for=203.0.113.7;proto=https'],
      ['x-forwarded-for', '203.0.113.7'],
      ['x-real-ip', '203.0.113.7'],
      ['x-forwarded-host', 'speech.example'],
      ['x-envoy-external-address', '203.0.113.7'],
      ['true-client-ip', '203.0.113.7'],
      ['via', '1.1 proxy.example'],
    ])
      await refused(port, { ...local, [name]: value }, `with ${name}`);
    // A page under another name that resolves here (DNS rebinding), or a proxy passing its public Host on.
    await refused(port, { host: 'speech.example' }, 'Host speech.example');
    assert.equal((await postDemoToken(port, { headers: local })).status, 200, 'a browser on this machine');
    assert.equal((await postDemoToken(port, { headers: { host: `127.0.0.1:${port}` } })).status, 200);
  });
});

describe('browser demo with a real upstream', () => {
  it('is not served: / and /demo/* are 404', async () => {
    const emulator = await startEmulator({ port: 0, host: '127.0.0.1' });
    const real = await startStack({}, { emulator });
    try {
      const base = `http://127.0.0.1:${real.gateway.server.port}`;
      for (const [method, path] of [
        ['GET', '/'],
        ['GET', '/demo/app.js'],
        ['POST', '/demo/token'],
      ]) {
        assert.equal((await fetch(base + path, { method })).status, 404, `${method} ${path}`);
      }
    } finally {
      await real.close();
    }
  });
});
