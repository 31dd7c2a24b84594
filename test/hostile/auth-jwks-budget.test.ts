// No amplification at the authenticator, against a real HTTP auth server: realms that
// answered 404 are remembered, realms not known yet share one request budget, and realms that
// verified before are not affected by either.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAuthenticator, type AuthDecision } from '../../src/auth/index.js';
import { startAuthServer, type SigningKey, type TestAuthServer } from '../auth/auth-server.js';

let srv: TestAuthServer;
let acmeKey: SigningKey;
let strayKey: SigningKey; // in no realm's JWKS: signs tokens for realms that don't exist
beforeAll(async () => {
  srv = await startAuthServer();
  acmeKey = await srv.addKey('acme');
  strayKey = await srv.addKey('stray-tmp');
  srv.setKeys('stray-tmp', []);
});
afterAll(() => srv.close());

function attempt(a: ReturnType<typeof createAuthenticator>, token: string, tenant: string): Promise<AuthDecision> {
  const query = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}` });
  return a.authenticate({ endpoint: 'transcribe', query, headers: { host: 'gw.example' } });
}
const tokenFor = (realm: string, key: SigningKey) =>
  srv.sign(realm, key, { scope: 'openid transcribe' }, { expiresIn: 3600 });
const reasonOf = (d: AuthDecision) => (d.ok ? 'ok' : `${d.status} ${d.reason}`);

describe('JWKS requests that unauthenticated clients can cause', () => {
  it('a realm that answered 404 is refused without asking again for 5 minutes', async () => {
    let clock = Date.now();
    const a = createAuthenticator({
      authUrl: srv.url,
      allowedOrigins: '*',
      allowFullAccessFromBrowsers: true,
      now: () => clock,
    });
    const token = await tokenFor('nowhere', strayKey);
    for (let i = 0; i < 3; i++) assert.equal(reasonOf(await attempt(a, token, 'nowhere')), '401 unknown_tenant');
    clock += 60_000;
    assert.equal(reasonOf(await attempt(a, token, 'nowhere')), '401 unknown_tenant');
    assert.equal(srv.certsRequests.get('nowhere'), 1);
    clock += 241_000;
    assert.equal(reasonOf(await attempt(a, token, 'nowhere')), '401 unknown_tenant');
    assert.equal(srv.certsRequests.get('nowhere'), 2);
  });

  it('new realms share a budget (503 "retry" when spent) while a realm that verified before keeps working', async () => {
    let clock = Date.now();
    const a = createAuthenticator({
      authUrl: srv.url,
      allowedOrigins: '*',
      allowFullAccessFromBrowsers: true,
      now: () => clock,
    });
    const acme = await tokenFor('acme', acmeKey);
    assert.equal(reasonOf(await attempt(a, acme, 'acme')), 'ok');
    const acmeFetches = srv.certsRequests.get('acme');

    const sprayed = Array.from({ length: 40 }, () => `spray-${randomBytes(4).toString('hex')}`);
    const results = await Promise.all(sprayed.map(async (t) => attempt(a, await tokenFor(t, strayKey), t)));
    const asked = sprayed.filter((t) => srv.certsRequests.has(t)).length;
    assert.ok(asked <= 10, `${asked} of 40 new realms reached the auth server`);
    const busy = results.filter((d) => !d.ok && d.reason === 'jwks_rate_limited');
    assert.equal(busy.length, 40 - asked);
    for (const d of busy)
      assert.ok(!d.ok && d.status === 503 && d.error.id === 'AUTH_UNAVAILABLE' && /retry/.test(d.error.details));

    const again = await Promise.all(Array.from({ length: 20 }, () => attempt(a, acme, 'acme')));
    assert.deepEqual(new Set(again.map(reasonOf)), new Set(['ok']));
    assert.equal(srv.certsRequests.get('acme'), acmeFetches, 'acme was not evicted nor refetched');

    const fresh = await srv.addKey('fresh');
    const freshToken = await tokenFor('fresh', fresh);
    assert.equal(reasonOf(await attempt(a, freshToken, 'fresh')), '503 jwks_rate_limited');
    clock += 1000; // the budget refills at 5 a second
    assert.equal(reasonOf(await attempt(a, freshToken, 'fresh')), 'ok');
  });
});
