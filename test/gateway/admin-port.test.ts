// What is on which port, as an operator sees it: /metrics and the usage API answer on the admin port
// (ADMIN_PORT) and not on the client port (PORT), which answers the sockets, health and readiness;
// each port answers anything else with the JSON 404; through a drain the admin port closes last.
// (The hop on the admin port: test/cluster/hop.test.ts.)
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { metric } from '../support/metrics.js';
import { configured, startStack, type Stack } from '../support/stack.js';

const API_TOKEN = 'admin-port-usage-token';

describe('the admin port', () => {
  let stack: Stack;
  let client: string;
  let admin: string;
  beforeAll(async () => {
    stack = await startStack({ USAGE_API_TOKEN: API_TOKEN });
    client = `http://127.0.0.1:${stack.gateway.server.port}`;
    admin = `http://127.0.0.1:${stack.gateway.server.adminPort}`;
  });
  afterAll(() => stack?.close());

  const get = (url: string, token?: string) =>
    fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  const day = new Date().toISOString().slice(0, 10);
  const usage = `/v1/usage?tenant=base&from=${day}T00:00:00Z&to=${day}T23:59:59Z&granularity=hour`;

  async function assertJson404(res: Response, path: string): Promise<void> {
    assert.equal(res.status, 404, `${path}: 404`);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const body = (await res.json()) as { type: string; error: { id: string; details: string } };
    assert.equal(body.type, 'error');
    assert.equal(body.error.id, 'NOT_FOUND');
  }

  it('is another port than the client port', () => {
    assert.ok(stack.gateway.server.adminPort > 0);
    assert.notEqual(stack.gateway.server.adminPort, stack.gateway.server.port);
  });

  it('serves /metrics (the Prometheus text, with a session counted); the client port answers 404', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' });
    const res = await get(`${admin}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(await res.text(), /^speech_gateway_active_sessions\{endpoint="transcribe",tenant="base"\} 1$/m);
    c.ws.close();
    await c.closed;
    await assertJson404(await get(`${client}/metrics`), 'client /metrics');
  });

  it('serves the usage API with its token (401 without); the client port answers 404 either way', async () => {
    const res = await get(`${admin}${usage}`, API_TOKEN);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { tenant: string }).tenant, 'base');
    assert.equal((await get(`${admin}${usage}`)).status, 401);
    await assertJson404(await get(`${client}${usage}`, API_TOKEN), 'client /v1/usage');
    await assertJson404(await get(`${client}/v1/tenants`, API_TOKEN), 'client /v1/tenants');
  });

  it('the client port serves health and readiness; the admin port does not', async () => {
    assert.equal((await get(`${client}/healthz`)).status, 200);
    assert.equal((await get(`${client}/readyz`)).status, 200);
    await assertJson404(await get(`${admin}/healthz`), 'admin /healthz');
    await assertJson404(await get(`${admin}/nothing-here`), 'admin /nothing-here');
  });

  it('takes no client sockets: an upgrade to the socket path on the admin port is the JSON 404', async () => {
    const res = await get(`${admin}/audio-bridge/v2/transcribe?tenant-name=base`);
    await assertJson404(res, 'admin socket path');
  });
});

/** Whether a new TCP connection to `port` is accepted (fetch may reuse one opened before a close). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

describe('the admin port through a drain', () => {
  let stack: Stack | undefined;
  afterAll(() => stack?.close());

  it('serves /metrics while the drain runs and after the client port has closed, until the gateway stops', async () => {
    stack = await startStack({ DRAIN_SECONDS: '1' });
    const { port, adminPort } = stack.gateway.server;
    const ended = () => metric(adminPort, 'speech_gateway_drain_sessions_total{result="ended"}');
    const before = await ended();
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' });

    const drained = stack.gateway.server.drain(1);
    assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 503, 'the client port answers: draining');
    assert.equal((await fetch(`http://127.0.0.1:${adminPort}/metrics`)).status, 200, 'scraped during the drain');
    await drained;
    assert.equal((await c.closed).code, 1012);
    assert.equal(await accepts(port), false, 'the client port is closed');
    assert.equal(await accepts(adminPort), true, 'the admin port is open');
    assert.equal(await ended(), before + 1, "the admin port still answers, with the drain's final count");

    await stack.gateway.stop();
    stack = undefined;
    assert.equal(await accepts(adminPort), false, 'the admin port closed last');
  });
});
