// Authentication over real sockets: who may open a session through the gateway, and what reaches the
// upstream. Unit-level rules (every refusal reason, JWKS caching) are in test/auth/.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { configured, englishConfiguration, openClient, refusal, startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const path = '/audio-bridge/v2/transcribe';
const q = (token: string, tenant = 'base') =>
  new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}` }).toString();

async function endSession(
  c: Awaited<ReturnType<typeof openClient>>,
  endpoint: 'transcribe' | 'streams' = 'transcribe',
) {
  await configured(c, englishConfiguration(endpoint));
  c.sendJson({ type: 'end' });
  await c.next(endpoint === 'transcribe' ? 'ended' : 'ENDED');
}

describe('authentication at the upgrade (through the gateway)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ ALLOWED_ORIGINS: 'https://app.example.org', JWKS_COOLDOWN_MS: '300' });
  });
  afterAll(() => stack.close());

  it('the three ways of presenting a token each open a session, and the upstream gets the client token (passthrough)', async () => {
    const token = await stack.token('openid transcribe');
    const viaQuery = await openClient(`${stack.base}${path}?${q(token)}`);
    await endSession(viaQuery);
    const viaHeader = await openClient(`${stack.base}${path}`, undefined, {
      Authorization: `Bearer ${token}`,
      'Tenant-Name': 'base',
    });
    await endSession(viaHeader);
    const viaProtocol = await openClient(
      `${stack.base}${path}`,
      ['Authorization', encodeURIComponent(`Bearer ${token}`), 'Tenant-Name', 'base'],
      { Origin: 'https://app.example.org' },
    );
    assert.ok(
      ['Authorization', 'Tenant-Name'].includes(viaProtocol.ws.protocol),
      `answered one of the offered protocols (got "${viaProtocol.ws.protocol}")`,
    );
    await endSession(viaProtocol);
    const last3 = stack.emulator.sessions.slice(-3);
    assert.deepEqual(
      last3.map((s) => s.token),
      [token, token, token],
    );
  });

  const cases: Array<[string, () => Promise<{ url: string; headers?: Record<string, string> }>, number, string]> = [
    ['missing token', async () => ({ url: `${stack.base}${path}?tenant-name=base` }), 401, 'TOKEN_MISSING'],
    ['malformed token', async () => ({ url: `${stack.base}${path}?${q('not.a.jwt')}` }), 401, 'TOKEN_INVALID'],
    [
      'expired token',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', expiresInSeconds: -120 }))}`,
      }),
      401,
      'TOKEN_EXPIRED',
    ],
    [
      'forged signature',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', signWithUnknownKey: true }))}`,
      }),
      401,
      'TOKEN_INVALID',
    ],
    [
      'alg none',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', alg: 'none' }))}`,
      }),
      401,
      'TOKEN_INVALID',
    ],
    [
      'HS256',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', alg: 'HS256' }))}`,
      }),
      401,
      'TOKEN_INVALID',
    ],
    [
      'token of tenant A with tenant-name B',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.emulator.issueToken({ tenant: 'tenant-a', scope: 'openid transcribe' }), 'tenant-b')}`,
      }),
      403,
      'TENANT_MISMATCH',
    ],
    [
      'streams token on /transcribe',
      async () => ({ url: `${stack.base}${path}?${q(await stack.token('openid streams'))}` }),
      403,
      'SCOPE_INSUFFICIENT',
    ],
    [
      'full-access token from a browser',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.token('openid'))}`,
        headers: { Origin: 'https://app.example.org' },
      }),
      403,
      'FULL_ACCESS_TOKEN_IN_BROWSER',
    ],
    [
      'origin not allowed',
      async () => ({
        url: `${stack.base}${path}?${q(await stack.token('openid transcribe'))}`,
        headers: { Origin: 'https://evil.example.com' },
      }),
      403,
      'ORIGIN_NOT_ALLOWED',
    ],
  ];
  for (const [name, make, status, id] of cases) {
    it(`refuses ${name}: HTTP ${status} ${id}, nothing upstream`, async () => {
      const before = stack.emulator.sessions.length;
      const { url, headers } = await make();
      const r = await refusal(url, undefined, headers);
      assert.equal(r.status, status);
      assert.equal(r.body.error.id, id);
      const token = new URLSearchParams(url.split('?')[1] ?? '').get('token')?.replace('Bearer ', '');
      if (token && token.length > 20)
        assert.ok(!JSON.stringify(r.body).includes(token.slice(-20)), 'the refusal does not echo the token');
      await delay(20);
      assert.equal(stack.emulator.sessions.length, before);
    });
  }

  it('a full-access token from a server client (no Origin) is allowed', async () => {
    const c = await openClient(`${stack.base}${path}?${q(await stack.token('openid'))}`);
    await endSession(c);
  });

  it('picks up a JWKS key rotation without a restart', async () => {
    await stack.emulator.rotateKeys('base', { dropOld: true });
    await delay(400); // past the refetch rate limit (JWKS_COOLDOWN_MS), as any rotation older than the cooldown
    const c = await openClient(`${stack.base}${path}?${q(await stack.token('openid transcribe'))}`);
    await endSession(c);
  });
});

describe('client-credentials mode', () => {
  let emulator: Emulator;
  let stack: Stack;
  beforeAll(async () => {
    emulator = await startEmulator({
      clients: {
        base: [{ clientId: 'gw', clientSecret: 'gw-secret' }],
        other: [{ clientId: 'gw2', clientSecret: 'gw2-secret' }],
      },
      tokenLifetimeSeconds: 4,
    });
    stack = await startStack(
      {
        UPSTREAM_AUTH: 'client-credentials',
        UPSTREAM_CREDENTIALS: JSON.stringify({
          base: { clientId: 'gw', clientSecret: 'gw-secret' },
          other: { clientId: 'gw2', clientSecret: 'gw2-secret' },
        }),
      },
      { emulator },
    );
  });
  afterAll(() => stack.close());

  it('the upstream sees the gateway token, refreshed before expiry under load, one request per tenant per refresh', async () => {
    const seen = new Set<string>();
    const clientTokens = new Set<string>();
    const deadline = Date.now() + 6000;
    let sessions = 0;
    while (Date.now() < deadline) {
      const batch = await Promise.all(
        ['base', 'base', 'other', 'other'].map(async (tenant) => {
          const t = await emulator.issueToken({ tenant, scope: 'openid transcribe' });
          clientTokens.add(t);
          const c = await stack.connect('transcribe', { token: t, tenant });
          await endSession(c);
        }),
      );
      sessions += batch.length;
      await delay(100);
    }
    for (const s of emulator.sessions) seen.add(s.token);
    assert.ok(sessions >= 8);
    for (const t of seen) assert.ok(!clientTokens.has(t), 'the client token never goes upstream');
    const perTenant = (tenant: string) => emulator.tokenRequests.filter((r) => r.tenant === tenant).length;
    // Tokens live 4 s and are refreshed at half-life: over ~6 s that is 3 to 5 requests, not one per session.
    for (const tenant of ['base', 'other']) {
      assert.ok(
        perTenant(tenant) >= 2 && perTenant(tenant) <= 6,
        `${tenant}: ${perTenant(tenant)} token requests for ${sessions / 2} sessions`,
      );
    }
    assert.ok(emulator.violations.every((v) => !/token|401|auth/i.test(v)));
  });
});
