// What is on which port, as an operator sees it: /metrics and the usage API answer on the admin port
// (ADMIN_PORT) and not on the client port (PORT), which answers the sockets, health and readiness;
// each port answers anything else with the JSON 404. (The hop on the admin port: test/cluster/hop.test.ts.)
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
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
