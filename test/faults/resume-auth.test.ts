// The token rule for a resume: a client that reconnects with the token it started with may present
// an expired one. `allowExpired` tells the upgrade gate who such a token belongs to, only when
// nothing but its age is wrong; every other refusal stays what it is.
import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { SignJWT, UnsecuredJWT } from 'jose';
import { createAuthenticator, isResumeKey, type AuthDecision } from '../../src/auth/index.js';
import { gatewayError } from '../../src/protocol/errors.js';
import type { Endpoint } from '../../src/protocol/index.js';
import { startAuthServer, type SigningKey, type TestAuthServer } from '../auth/auth-server.js';

let srv: TestAuthServer;
let acme: SigningKey;
const EXPIRED = { issuedAt: -420, expiresIn: -120 }; // a 5-minute token, expired beyond the 30 s clock tolerance

beforeAll(async () => {
  srv = await startAuthServer();
  acme = await srv.addKey('acme');
  await srv.addKey('globex');
});
afterAll(() => srv.close());

const authenticator = () =>
  createAuthenticator({ authUrl: srv.url, allowedOrigins: 'same-origin', allowFullAccessFromBrowsers: false });

function request(
  token: string,
  tenant = 'acme',
  endpoint: Endpoint = 'transcribe',
  headers: Record<string, string> = {},
) {
  const query = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}` });
  return { endpoint, query, headers: { host: 'gw.example', ...headers } };
}

const userToken = (claims: Record<string, unknown> = {}, opts: Parameters<TestAuthServer['sign']>[3] = EXPIRED) =>
  srv.sign('acme', acme, { scope: 'openid transcribe', sub: 'user-1', azp: 'web', ...claims }, opts);

/** Authenticates as a resume would, expecting the refusal a fresh connection would get. */
async function assertStillRefused(req: ReturnType<typeof request>, reason: string, token: string) {
  const d: AuthDecision = await authenticator().authenticate(req, { allowExpired: true });
  assert.equal(d.ok, false, `expected refusal ${reason}, got ${JSON.stringify(d)}`);
  if (d.ok) return;
  assert.equal(d.reason, reason);
  const text = JSON.stringify(d);
  for (const part of token.split('.').filter((p) => p.length > 8))
    assert.ok(!text.includes(part), 'refusal leaks the token');
}

describe('authenticate(req, { allowExpired: true })', () => {
  it('an expired token that otherwise verifies: ok, expired, with who it is', async () => {
    const token = await userToken();
    const d = await authenticator().authenticate(request(token), { allowExpired: true });
    assert.ok(d.ok, JSON.stringify(d));
    assert.equal(d.expired, true);
    assert.equal(d.tenant, 'acme');
    assert.equal(d.subject, 'user-1');
    assert.deepEqual(d.scopes, ['openid', 'transcribe']);
    assert.equal(d.tokenKind, 'limited');
    assert.equal(d.clientId, 'web');
    assert.equal(d.clientToken, token);
    assert.ok(d.tokenExpiresAt < Date.now() - 100_000, 'tokenExpiresAt is when it expired');
  });

  it('the vendor SDK reconnecting through Sec-WebSocket-Protocol gets the protocol to answer with', async () => {
    const token = await userToken();
    const headers = {
      'sec-websocket-protocol': `Authorization, ${encodeURIComponent(`Bearer ${token}`)}, Tenant-Name, acme`,
    };
    const d = await authenticator().authenticate(
      { endpoint: 'transcribe', query: new URLSearchParams(), headers },
      { allowExpired: true },
    );
    assert.ok(d.ok && d.expired, JSON.stringify(d));
    assert.equal(d.via, 'protocol');
    assert.equal(d.protocol, 'Authorization');
  });

  it('a token that has not expired carries no expired mark', async () => {
    const d = await authenticator().authenticate(request(await userToken({}, {})), { allowExpired: true });
    assert.ok(d.ok);
    assert.equal(d.expired, undefined);
  });

  it('without the option an expired token is refused as before: 401 TOKEN_EXPIRED, no identity', async () => {
    const token = await userToken();
    for (const d of [
      await authenticator().authenticate(request(token)),
      await authenticator().authenticate(request(token), {}),
    ]) {
      assert.equal(d.ok, false);
      if (d.ok) return;
      assert.equal(d.status, 401);
      assert.equal(d.error.id, 'TOKEN_EXPIRED');
      assert.deepEqual(Object.keys(d).sort(), ['error', 'ok', 'reason', 'status']);
    }
  });

  it('a forged signature or a key the realm does not publish stays refused', async () => {
    const rogue = await srv.addKey('rogue');
    const forged = await srv.sign(
      'acme',
      { ...rogue, kid: acme.kid },
      { scope: 'openid transcribe', sub: 'user-1' },
      EXPIRED,
    );
    await assertStillRefused(request(forged), 'bad_signature', forged);
    const unknown = await srv.sign('acme', rogue, { scope: 'openid transcribe', sub: 'user-1' }, EXPIRED);
    await assertStillRefused(request(unknown), 'unknown_key', unknown);
  });

  it("another tenant, another issuer, another endpoint's scope stay refused", async () => {
    const token = await userToken();
    await assertStillRefused(request(token, 'globex'), 'wrong_tenant', token);
    const foreign = await userToken({}, { ...EXPIRED, iss: 'https://evil.example/realms/acme' });
    await assertStillRefused(request(foreign), 'issuer', foreign);
    await assertStillRefused(request(token, 'acme', 'streams'), 'scope', token);
  });

  it('a full-access token from a browser, or from a foreign origin, stays refused', async () => {
    const full = await srv.sign('acme', acme, { scope: 'openid profile', sub: 'svc' }, EXPIRED);
    await assertStillRefused(
      request(full, 'acme', 'transcribe', { origin: 'https://gw.example' }),
      'full_access_from_browser',
      full,
    );
    const token = await userToken();
    await assertStillRefused(request(token, 'acme', 'transcribe', { origin: 'https://evil.example' }), 'origin', token);
  });

  it('alg none, HS256, a token not yet valid, one without a subject stay refused', async () => {
    const iss = `${srv.url}/realms/acme`;
    const past = Math.floor(Date.now() / 1000) - 120;
    const claims = { scope: 'openid transcribe', sub: 'user-1' };
    const none = new UnsecuredJWT(claims).setIssuer(iss).setExpirationTime(past).encode();
    const hs = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(iss)
      .setExpirationTime(past)
      .sign(new TextEncoder().encode('a-shared-secret-of-enough-length!!'));
    await assertStillRefused(request(none), 'bad_algorithm', none);
    await assertStillRefused(request(hs), 'bad_algorithm', hs);
    const early = await userToken({}, { ...EXPIRED, nbf: past + 3600 });
    await assertStillRefused(request(early), 'not_yet_valid', early);
    const anonymous = await userToken({ sub: undefined });
    await assertStillRefused(request(anonymous), 'token_expired', anonymous);
  });
});

describe('isResumeKey', () => {
  it('22–128 characters of A-Z a-z 0-9 _ -', () => {
    for (const ok of ['a'.repeat(22), 'Zz09_-'.repeat(4), '0123456789abcdef'.repeat(2), 'x'.repeat(128)])
      assert.equal(isResumeKey(ok), true, ok);
    for (const bad of [
      '',
      'a'.repeat(21),
      'x'.repeat(129),
      `${'a'.repeat(22)}=`,
      `${'a'.repeat(22)} `,
      'a+b/'.repeat(8),
      `${'a'.repeat(21)}é`,
      undefined,
      null,
      42,
    ]) {
      assert.equal(isResumeKey(bad), false, String(bad));
    }
  });

  it('a bad key is a 400 INVALID_RESUME_KEY', () => {
    const e = gatewayError('INVALID_RESUME_KEY', 'resume must be 22-128 characters of A-Z a-z 0-9 _ -');
    assert.equal(e.status, 400);
    assert.equal(e.id, 'INVALID_RESUME_KEY');
  });
});
