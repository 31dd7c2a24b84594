// Whose address the audit trail records. X-Forwarded-For is a header anyone can send: it counts only
// from a peer inside TRUSTED_PROXY_CIDRS (the proxies), never on the admin port (which no proxy
// fronts), and the socket's peer is recorded beside whatever address was taken.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { endpointPath, englishConfiguration, openClient, refusal, startStack, type Stack } from '../support/stack.js';
import { until } from '../support/wait.js';

const API = 'client-address-test-token';
type Event = Record<string, any>;

const events = (stack: Stack): Event[] =>
  readFileSync(stack.gateway.config.AUDIT_LOG_FILE!, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);

/** A configured and closed /streams session of tenant base whose upgrade carried `forwardedFor`; its events. */
async function sessionFrom(stack: Stack, forwardedFor: string): Promise<Event[]> {
  const token = await stack.token('openid streams');
  const interactionId = randomUUID();
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const c = await openClient(`${stack.base}${endpointPath('streams', interactionId)}?${q}`, undefined, {
    'X-Forwarded-For': forwardedFor,
  });
  c.sendJson({ type: 'config', configuration: englishConfiguration('streams') });
  await c.next('CONFIG_ACCEPTED');
  c.ws.close();
  const mine = () => events(stack).filter((e) => e.interactionId === interactionId);
  await until(() => mine().some((e) => e.event === 'session_ended'), 'the session ended in the audit file');
  return mine();
}

async function apiCall(stack: Stack, forwardedFor: string): Promise<Event> {
  const port = stack.gateway.server.adminPort;
  const res = await fetch(`http://127.0.0.1:${port}/v1/tenants`, {
    headers: { authorization: `Bearer ${API}`, 'x-forwarded-for': forwardedFor },
  });
  assert.equal(res.status, 200);
  await until(() => events(stack).some((e) => e.event === 'usage_api_call'), 'the call in the audit file');
  return events(stack).find((e) => e.event === 'usage_api_call')!;
}

const LOOPBACK = /^(::ffff:)?127\.0\.0\.1$/;

describe('a peer outside TRUSTED_PROXY_CIDRS (a client reaching the pod directly)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ TRUSTED_PROXIES: '1', TRUSTED_PROXY_CIDRS: '10.0.0.0/8, fd00::/8' });
  });
  afterAll(() => stack?.close());

  it('is recorded as itself, whatever X-Forwarded-For it sends', async () => {
    const session = await sessionFrom(stack, '203.0.113.66');
    assert.ok(session.length >= 3, JSON.stringify(session));
    for (const e of session) {
      assert.match(e.address, LOOPBACK, `${e.event}: the socket's peer, not the header`);
      assert.equal(e.peer, e.address);
    }
    await refusal(`${stack.base}${endpointPath('transcribe')}?tenant-name=base`, undefined, {
      'X-Forwarded-For': '203.0.113.67',
    });
    await until(() => events(stack).some((e) => e.event === 'upgrade_refused'), 'the refusal');
    const refused = events(stack).find((e) => e.event === 'upgrade_refused')!;
    assert.match(refused.address, LOOPBACK);
    assert.ok(!JSON.stringify(events(stack)).includes('203.0.113.6'), 'the forged addresses are nowhere');
  });
});

describe('behind a proxy inside TRUSTED_PROXY_CIDRS', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ TRUSTED_PROXIES: '1', TRUSTED_PROXY_CIDRS: '127.0.0.0/8', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack?.close());

  it("a client socket: the address the proxy saw, and the proxy's own beside it", async () => {
    const session = await sessionFrom(stack, '10.1.1.1, 203.0.113.66');
    assert.deepEqual(
      session.map((e) => e.event),
      ['upgrade_accepted', 'session_opened', 'config_accepted', 'session_ended'],
    );
    for (const e of session) {
      assert.equal(e.address, '203.0.113.66');
      assert.match(e.peer, LOOPBACK);
    }
  });

  it('the admin port (usage API) never takes the header: no proxy fronts it', async () => {
    const call = await apiCall(stack, '198.51.100.9');
    assert.match(call.address, LOOPBACK);
    assert.equal(call.peer, call.address);
  });
});
