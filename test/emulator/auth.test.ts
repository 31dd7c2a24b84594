import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';

async function token(em: Emulator, tenant: string, form: Record<string, string>) {
  const res = await fetch(`${em.authBase}/realms/${tenant}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('emulator auth server', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator({
      clients: {
        base: [{ clientId: 'dev', clientSecret: 'dev-secret' }],
        acme: [{ clientId: 'svc', clientSecret: 's3' }],
      },
    });
  });
  afterAll(() => em.close());

  it('issues a client-credentials token that verifies against the realm JWKS', async () => {
    const { status, body } = await token(em, 'base', {
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
    });
    assert.equal(status, 200);
    assert.equal(body.token_type, 'Bearer');
    assert.equal(body.expires_in, 300);
    assert.equal(body.scope, 'openid');
    const jwks = createRemoteJWKSet(new URL(`${em.authBase}/realms/base/protocol/openid-connect/certs`));
    const { payload } = await jwtVerify(body.access_token, jwks, { issuer: `${em.authBase}/realms/base` });
    assert.equal(payload.azp, 'dev');
    assert.equal(payload.scope, 'openid');
    assert.equal((payload.exp as number) - (payload.iat as number), 300);
    assert.ok(payload.jti);
    assert.deepEqual(em.tokenRequests.at(-1)?.clientId, 'dev');
  });

  it('grants limited scopes and refuses unknown ones', async () => {
    const ok = await token(em, 'acme', {
      grant_type: 'client_credentials',
      client_id: 'svc',
      client_secret: 's3',
      scope: 'openid transcribe',
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.scope, 'openid transcribe');
    const bad = await token(em, 'acme', {
      grant_type: 'client_credentials',
      client_id: 'svc',
      client_secret: 's3',
      scope: 'openid admin',
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'invalid_scope');
    const noOpenid = await token(em, 'acme', {
      grant_type: 'client_credentials',
      client_id: 'svc',
      client_secret: 's3',
      scope: 'streams',
    });
    assert.equal(noOpenid.status, 400);
  });

  it('refuses a wrong secret, a client of another tenant, and an invalid tenant name', async () => {
    const wrong = await token(em, 'base', {
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'nope',
    });
    assert.equal(wrong.status, 401);
    assert.deepEqual(wrong.body.error, 'invalid_client');
    const otherRealm = await token(em, 'acme', {
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
    });
    assert.equal(otherRealm.status, 401);
    const unknown = await token(em, 'Not_A_Tenant', {
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
    });
    assert.equal(unknown.status, 404);
    assert.deepEqual(
      em.tokenRequests.slice(-2).map((r) => r.tenant),
      ['base', 'acme'],
    );
  });

  it('rotates keys: new tokens carry the new kid, old ones verify until the old key is dropped', async () => {
    const jwksUrl = new URL(`${em.authBase}/realms/rot/protocol/openid-connect/certs`);
    const old = await em.issueToken({ tenant: 'rot' });
    await em.rotateKeys('rot');
    const fresh = await em.issueToken({ tenant: 'rot' });
    assert.notEqual(decodeProtectedHeader(old).kid, decodeProtectedHeader(fresh).kid);
    await jwtVerify(old, createRemoteJWKSet(jwksUrl));
    await jwtVerify(fresh, createRemoteJWKSet(jwksUrl));
    await em.rotateKeys('rot', { dropOld: true });
    const jwks = createRemoteJWKSet(jwksUrl);
    await assert.rejects(jwtVerify(old, jwks));
    await assert.rejects(jwtVerify(fresh, jwks));
    await jwtVerify(await em.issueToken({ tenant: 'rot' }), jwks);
  });

  it('signs negative-test tokens that a JWKS verifier refuses', async () => {
    const jwks = createRemoteJWKSet(new URL(`${em.authBase}/realms/base/protocol/openid-connect/certs`));
    await jwtVerify(await em.issueToken({ tenant: 'base', alg: 'ES256' }), jwks);
    await assert.rejects(jwtVerify(await em.issueToken({ tenant: 'base', signWithUnknownKey: true }), jwks));
    await assert.rejects(jwtVerify(await em.issueToken({ tenant: 'base', alg: 'HS256' }), jwks));
    await assert.rejects(jwtVerify(await em.issueToken({ tenant: 'base', alg: 'none' }), jwks));
    await assert.rejects(jwtVerify(await em.issueToken({ tenant: 'base', expiresInSeconds: -10 }), jwks));
  });
});
