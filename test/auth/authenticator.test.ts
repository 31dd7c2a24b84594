import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { SignJWT, UnsecuredJWT } from 'jose';
import { createAuthenticator, type AuthDecision, type AuthOptions } from '../../src/auth/index.js';
import type { Endpoint } from '../../src/protocol/index.js';
import { startAuthServer, type SigningKey, type TestAuthServer } from './auth-server.js';

let srv: TestAuthServer;
let keyA: SigningKey;
let keyB: SigningKey;

beforeAll(async () => {
  srv = await startAuthServer();
  keyA = await srv.addKey('acme');
  keyB = await srv.addKey('globex', 'ES256');
});
afterAll(() => srv.close());

function auth(o: Partial<AuthOptions> = {}) {
  return createAuthenticator({
    authUrl: srv.url,
    allowedOrigins: 'same-origin',
    allowFullAccessFromBrowsers: false,
    ...o,
  });
}

function viaQuery(
  token: string,
  tenant: string | undefined,
  endpoint: Endpoint = 'transcribe',
  headers: Record<string, string> = {},
) {
  const query = new URLSearchParams();
  if (tenant !== undefined) query.set('tenant-name', tenant);
  query.set('token', `Bearer ${token}`);
  return { endpoint, query, headers: { host: 'gw.example', ...headers } };
}

const transcribeToken = (claims: Record<string, unknown> = {}, opts = {}) =>
  srv.sign('acme', keyA, { scope: 'openid transcribe', sub: 'user-1', azp: 'web', ...claims }, opts);

function assertRefused(d: AuthDecision, status: number, reason: string, token?: string) {
  assert.equal(d.ok, false, `expected refusal ${reason}, got ${JSON.stringify(d)}`);
  if (d.ok) return;
  assert.equal(d.status, status);
  assert.equal(d.reason, reason);
  assert.equal(d.error.status, status);
  if (token) {
    const text = JSON.stringify(d);
    for (const part of token.split('.').filter((p) => p.length > 8))
      assert.ok(!text.includes(part), 'refusal leaks the token');
  }
}

describe('refusals', () => {
  it('missing token → 401 TOKEN_MISSING', async () => {
    const d = await auth().authenticate({
      endpoint: 'transcribe',
      query: new URLSearchParams('tenant-name=acme'),
      headers: {},
    });
    assertRefused(d, 401, 'token_missing');
    assert.equal(!d.ok && d.error.id, 'TOKEN_MISSING');
  });

  it('malformed token → 401 TOKEN_INVALID', async () => {
    for (const bad of ['Bearer not-a-jwt', 'Basic dXNlcjpwYXNz', 'Bearer a.b.c']) {
      const query = new URLSearchParams({ 'tenant-name': 'acme', token: bad });
      const d = await auth().authenticate({ endpoint: 'transcribe', query, headers: {} });
      assertRefused(d, 401, 'token_malformed');
      assert.equal(!d.ok && d.error.id, 'TOKEN_INVALID');
    }
  });

  it('missing tenant → 401, unsafe tenant → 403, without touching the auth server', async () => {
    const token = await transcribeToken();
    assertRefused(await auth().authenticate(viaQuery(token, undefined)), 401, 'tenant_missing', token);
    const before = srv.certsRequests.size;
    assertRefused(await auth().authenticate(viaQuery(token, '../admin')), 403, 'tenant_invalid', token);
    assert.equal(srv.certsRequests.size, before);
  });

  it('expired token → 401 TOKEN_EXPIRED', async () => {
    const token = await transcribeToken({}, { expiresIn: -120 });
    const d = await auth().authenticate(viaQuery(token, 'acme'));
    assertRefused(d, 401, 'token_expired', token);
    assert.equal(!d.ok && d.error.id, 'TOKEN_EXPIRED');
  });

  it('expired within the clock tolerance still passes', async () => {
    const token = await transcribeToken({}, { expiresIn: -5 });
    assert.equal((await auth().authenticate(viaQuery(token, 'acme'))).ok, true);
  });

  it('nbf in the future → 401', async () => {
    const token = await transcribeToken({}, { nbf: Math.floor(Date.now() / 1000) + 600 });
    assertRefused(await auth().authenticate(viaQuery(token, 'acme')), 401, 'not_yet_valid', token);
  });

  it('signed by a key the realm does not publish → 401', async () => {
    const rogue = await srv.addKey('rogue-realm');
    // same kid as the real key: the signature check fails
    const forged = await srv.sign('acme', { ...rogue, kid: keyA.kid }, { scope: 'openid transcribe' });
    assertRefused(await auth().authenticate(viaQuery(forged, 'acme')), 401, 'bad_signature', forged);
    // a kid the realm does not have
    const unknown = await srv.sign('acme', rogue, { scope: 'openid transcribe' });
    assertRefused(await auth().authenticate(viaQuery(unknown, 'acme')), 401, 'unknown_key', unknown);
  });

  it('alg none and HS256 → 401 before any JWKS fetch', async () => {
    const a = auth();
    const iss = `${srv.url}/realms/fresh-realm`;
    const none = new UnsecuredJWT({ scope: 'openid transcribe' }).setIssuer(iss).setExpirationTime('5m').encode();
    const hs = await new SignJWT({ scope: 'openid transcribe' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(iss)
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('a-shared-secret-of-enough-length!!'));
    assertRefused(await a.authenticate(viaQuery(none, 'fresh-realm')), 401, 'bad_algorithm', none);
    assertRefused(await a.authenticate(viaQuery(hs, 'fresh-realm')), 401, 'bad_algorithm', hs);
    assert.equal(srv.certsRequests.get('fresh-realm'), undefined);
  });

  it("tenant A's token with tenant-name B → 403 TENANT_MISMATCH, without fetching B's keys", async () => {
    const a = auth();
    const token = await transcribeToken();
    const before = srv.certsRequests.get('globex') ?? 0;
    const d = await a.authenticate(viaQuery(token, 'globex'));
    assertRefused(d, 403, 'wrong_tenant', token);
    assert.equal(!d.ok && d.error.id, 'TENANT_MISMATCH');
    assert.equal(srv.certsRequests.get('globex') ?? 0, before);
  });

  it('an issuer outside AUTH_URL → 401', async () => {
    const token = await transcribeToken({}, { iss: 'https://evil.example/realms/acme' });
    assertRefused(await auth().authenticate(viaQuery(token, 'acme')), 401, 'issuer', token);
  });

  it('a token without exp → 401', async () => {
    const token = await new SignJWT({ scope: 'openid transcribe' })
      .setProtectedHeader({ alg: 'RS256', kid: keyA.kid })
      .setIssuer(`${srv.url}/realms/acme`)
      .sign(keyA.privateKey);
    assertRefused(await auth().authenticate(viaQuery(token, 'acme')), 401, 'claims', token);
  });

  it('limited token for the other endpoint → 403 SCOPE_INSUFFICIENT', async () => {
    const streams = await srv.sign('acme', keyA, { scope: 'openid streams' });
    const d = await auth().authenticate(viaQuery(streams, 'acme', 'transcribe'));
    assertRefused(d, 403, 'scope', streams);
    assert.equal(!d.ok && d.error.id, 'SCOPE_INSUFFICIENT');
    const transcribe = await transcribeToken();
    assertRefused(await auth().authenticate(viaQuery(transcribe, 'acme', 'streams')), 403, 'scope');
    assert.equal((await auth().authenticate(viaQuery(streams, 'acme', 'streams'))).ok, true);
  });

  it('full-access token: refused with an Origin, accepted without, or when allowed', async () => {
    const full = await srv.sign('acme', keyA, { scope: 'openid profile', azp: 'backend' });
    const d = await auth().authenticate(viaQuery(full, 'acme', 'streams', { origin: 'https://gw.example' }));
    assertRefused(d, 403, 'full_access_from_browser', full);
    assert.equal(!d.ok && d.error.id, 'FULL_ACCESS_TOKEN_IN_BROWSER');

    const server = await auth().authenticate(viaQuery(full, 'acme', 'streams'));
    assert.ok(server.ok);
    assert.equal(server.tokenKind, 'full');
    assert.equal(server.clientId, 'backend');

    const allowed = await auth({ allowFullAccessFromBrowsers: true }).authenticate(
      viaQuery(full, 'acme', 'streams', { origin: 'https://gw.example' }),
    );
    assert.equal(allowed.ok, true);
  });

  it('an unknown realm → 401; an unreachable auth server → 503', async () => {
    const ghost = await srv.addKey('ghost-tmp');
    srv.setKeys('ghost-tmp', []);
    const token = await srv.sign('nowhere', ghost, { scope: 'openid transcribe' });
    assertRefused(await auth().authenticate(viaQuery(token, 'nowhere')), 401, 'unknown_tenant', token);

    srv.failWith = 500;
    try {
      const t2 = await srv.sign('down', ghost, { scope: 'openid transcribe' });
      const d = await auth().authenticate(viaQuery(t2, 'down'));
      assertRefused(d, 503, 'jwks_unavailable', t2);
    } finally {
      srv.failWith = undefined;
    }
  });
});

describe('origins', () => {
  const browser = async (a: ReturnType<typeof auth>, origin: string | undefined, host = 'gw.example') => {
    const token = await transcribeToken();
    const req = viaQuery(token, 'acme', 'transcribe', { host });
    if (origin !== undefined) (req.headers as Record<string, string>).origin = origin;
    return a.authenticate(req);
  };

  it('same-origin (default) allows the gateway host and clients without Origin, refuses others', async () => {
    const a = auth();
    assert.equal((await browser(a, 'https://gw.example')).ok, true);
    assert.equal((await browser(a, 'https://GW.example:443', 'gw.example')).ok, true);
    assert.equal((await browser(a, undefined)).ok, true);
    const d = await browser(a, 'https://evil.example');
    assertRefused(d, 403, 'origin');
    assert.equal(!d.ok && d.error.id, 'ORIGIN_NOT_ALLOWED');
    assertRefused(await browser(a, 'null'), 403, 'origin');
    assertRefused(await browser(a, 'https://gw.example:8443'), 403, 'origin');
  });

  it('a list allows exactly those origins, case-insensitively, trailing slash ignored', async () => {
    const a = auth({ allowedOrigins: ['https://App.example/', 'http://localhost:3000'] });
    assert.equal((await browser(a, 'https://app.example')).ok, true);
    assert.equal((await browser(a, 'http://localhost:3000')).ok, true);
    assertRefused(await browser(a, 'https://gw.example'), 403, 'origin');
    assertRefused(await browser(a, 'http://localhost:3001'), 403, 'origin');
    assertRefused(await browser(a, 'https://app.example.evil.com'), 403, 'origin');
  });

  it("'*' allows any origin", async () => {
    assert.equal((await browser(auth({ allowedOrigins: '*' }), 'https://anything.example')).ok, true);
  });

  it('origin is refused before the token is looked at', async () => {
    const d = await auth().authenticate({
      endpoint: 'transcribe',
      query: new URLSearchParams(),
      headers: { host: 'gw.example', origin: 'https://evil.example' },
    });
    assertRefused(d, 403, 'origin');
  });
});

describe('the three ways of presenting a token', () => {
  it('query parameters', async () => {
    const token = await transcribeToken();
    const d = await auth().authenticate(viaQuery(token, 'acme'));
    assert.ok(d.ok);
    assert.equal(d.via, 'query');
    assert.equal(d.tenant, 'acme');
    assert.equal(d.clientToken, token);
    assert.equal(d.tokenKind, 'limited');
    assert.deepEqual(d.scopes, ['openid', 'transcribe']);
    assert.equal(d.subject, 'user-1');
    assert.equal(d.protocol, undefined);
    assert.ok(Math.abs(d.tokenExpiresAt - (Date.now() + 300_000)) < 60_000);
  });

  it('Authorization and Tenant-Name headers', async () => {
    const token = await srv.sign('globex', keyB, { scope: 'openid streams' });
    const d = await auth().authenticate({
      endpoint: 'streams',
      query: new URLSearchParams(),
      headers: { authorization: `Bearer ${token}`, 'tenant-name': 'globex' },
    });
    assert.ok(d.ok);
    assert.equal(d.via, 'header');
    assert.equal(d.tenant, 'globex');
  });

  it('Sec-WebSocket-Protocol pairs, answering with an offered protocol that is not the secret', async () => {
    const token = await transcribeToken();
    const offered = ['Authorization', encodeURIComponent(`Bearer ${token}`), 'Tenant-Name', 'acme'];
    const d = await auth().authenticate({
      endpoint: 'transcribe',
      query: new URLSearchParams(),
      headers: { 'sec-websocket-protocol': offered.join(', '), origin: 'https://gw.example', host: 'gw.example' },
    });
    assert.ok(d.ok, JSON.stringify(!d.ok && d));
    assert.equal(d.via, 'protocol');
    assert.equal(d.tenant, 'acme');
    assert.equal(d.clientToken, token);
    assert.ok(d.protocol && offered.includes(d.protocol));
    assert.ok(!d.protocol.includes(token.slice(0, 20)));
  });

  it('query token with offered protocols answers with one of them', async () => {
    const token = await transcribeToken();
    const req = viaQuery(token, 'acme', 'transcribe', { 'sec-websocket-protocol': 'v2.transcribe, json' });
    const d = await auth().authenticate(req);
    assert.ok(d.ok);
    assert.equal(d.protocol, 'v2.transcribe');
  });
});

describe('JWKS cache', () => {
  it('key rotation: a token signed with a new key passes without recreating the authenticator', async () => {
    let clock = Date.now();
    const realm = 'rotating';
    const oldKey = await srv.addKey(realm);
    const a = auth({ now: () => clock });
    const t1 = await srv.sign(realm, oldKey, { scope: 'openid transcribe' });
    assert.equal((await a.authenticate(viaQuery(t1, realm))).ok, true);
    assert.equal(srv.certsRequests.get(realm), 1);

    const newKey = await srv.addKey(realm, 'PS256');
    srv.setKeys(realm, [newKey]);
    clock += 31_000; // past the refetch cooldown
    const t2 = await srv.sign(realm, newKey, { scope: 'openid transcribe' });
    const d = await a.authenticate(viaQuery(t2, realm));
    assert.equal(d.ok, true, JSON.stringify(d));
    assert.equal(srv.certsRequests.get(realm), 2);
  });

  it('within the cooldown an unknown kid does not refetch', async () => {
    const clock = Date.now();
    const realm = 'cooling';
    const k1 = await srv.addKey(realm);
    const a = auth({ now: () => clock });
    assert.equal(
      (await a.authenticate(viaQuery(await srv.sign(realm, k1, { scope: 'openid transcribe' }), realm))).ok,
      true,
    );
    const k2 = await srv.addKey(realm);
    const t2 = await srv.sign(realm, k2, { scope: 'openid transcribe' });
    for (let i = 0; i < 5; i++) assertRefused(await a.authenticate(viaQuery(t2, realm)), 401, 'unknown_key');
    assert.equal(srv.certsRequests.get(realm), 1);
  });

  it('20 parallel upgrades with a new kid cause one refetch', async () => {
    let clock = Date.now();
    const realm = 'burst';
    const k1 = await srv.addKey(realm);
    const a = auth({ now: () => clock });
    assert.equal(
      (await a.authenticate(viaQuery(await srv.sign(realm, k1, { scope: 'openid transcribe' }), realm))).ok,
      true,
    );
    const k2 = await srv.addKey(realm);
    clock += 31_000;
    const token = await srv.sign(realm, k2, { scope: 'openid transcribe' });
    const results = await Promise.all(Array.from({ length: 20 }, () => a.authenticate(viaQuery(token, realm))));
    assert.ok(results.every((r) => r.ok));
    assert.equal(srv.certsRequests.get(realm), 2);
  });

  it('20 parallel first upgrades for a realm cause one fetch', async () => {
    const realm = 'cold';
    const k = await srv.addKey(realm);
    const a = auth();
    const token = await srv.sign(realm, k, { scope: 'openid transcribe' });
    const results = await Promise.all(Array.from({ length: 20 }, () => a.authenticate(viaQuery(token, realm))));
    assert.ok(results.every((r) => r.ok));
    assert.equal(srv.certsRequests.get(realm), 1);
  });
});

describe('verified tokens', () => {
  // A client opens many sockets with one token: its signature is checked once a minute, not per socket.
  it('a token seen verified is not checked again for a minute: set-ups skip the signature, even past a key change', async () => {
    let clock = Date.now();
    const realm = 'reused';
    const k1 = await srv.addKey(realm);
    const a = auth({ now: () => clock });
    const token = await srv.sign(realm, k1, { scope: 'openid transcribe', sub: 'user-1' }, { expiresIn: 3600 });
    assert.equal((await a.authenticate(viaQuery(token, realm))).ok, true);
    const k2 = await srv.addKey(realm);
    srv.setKeys(realm, [k2]);
    clock += 31_000; // past the refetch cooldown: a token with the new key makes the realm's keys refetched
    assert.equal(
      (await a.authenticate(viaQuery(await srv.sign(realm, k2, { scope: 'openid transcribe' }), realm))).ok,
      true,
    );
    assert.equal(srv.certsRequests.get(realm), 2);
    for (let i = 0; i < 3; i++)
      assert.equal((await a.authenticate(viaQuery(token, realm))).ok, true, 'verified a moment ago');
    clock += 30_000; // a minute after its verification: checked in full again, against the keys published now
    assertRefused(await a.authenticate(viaQuery(token, realm)), 401, 'unknown_key');
  });

  it('a reused token still expires on time', async () => {
    const realm = 'expiring';
    const k = await srv.addKey(realm);
    const token = await srv.sign(realm, k, { scope: 'openid transcribe', sub: 'user-1' }, { expiresIn: 40 });
    let clock = Date.now(); // after signing: exp is 40 s from the signer's clock
    const a = auth({ now: () => clock });
    assert.equal((await a.authenticate(viaQuery(token, realm))).ok, true);
    clock += 40_000 + 31_000; // past exp and the clock tolerance, within the minute a verification is reused
    assertRefused(await a.authenticate(viaQuery(token, realm)), 401, 'token_expired');
    assert.equal(
      (await a.authenticate(viaQuery(token, realm), { allowExpired: true })).ok,
      true,
      'a resume may still present it',
    );
  });
});
