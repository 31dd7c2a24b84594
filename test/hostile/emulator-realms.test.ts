// No amplification, emulator side: a request naming a realm the emulator was not
// configured with is refused without generating a key pair (a stranger could otherwise make it
// generate one per random name), while configured and in-process realms keep working.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { forgedJwt } from '../support/jwt.js';
import { openClient, refusal } from '../support/stack.js';

describe('emulator realms', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator({
      clients: { base: [{ clientId: 'dev', clientSecret: 'dev-secret' }] },
      realms: ['extra'],
    });
  });
  afterAll(() => em.close());

  const certs = (tenant: string) => fetch(`${em.authBase}/realms/${tenant}/protocol/openid-connect/certs`);
  const token = (tenant: string) =>
    fetch(`${em.authBase}/realms/${tenant}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'dev',
        client_secret: 'dev-secret',
      }).toString(),
    });
  const socketUrl = (tenant: string, jwt: string) =>
    `${em.wsBase}/transcribe?${new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${jwt}` })}`;

  it('an unknown realm gets 404 on certs and token and 401 on a socket, and no keys are made for it', async () => {
    const realmsBefore = em.realms().sort();
    const jwksBefore = em.jwksRequests;
    for (const tenant of ['ghost', `r-${randomBytes(4).toString('hex')}`]) {
      assert.equal((await certs(tenant)).status, 404, tenant);
      assert.equal((await token(tenant)).status, 404, tenant);
      const forged = forgedJwt({ alg: 'RS256', kid: 'x' }, { iss: `${em.authBase}/realms/${tenant}`, exp: 2e9 });
      assert.equal((await refusal(socketUrl(tenant, forged))).status, 401, tenant);
    }
    assert.deepEqual(em.realms().sort(), realmsBefore);
    assert.equal(em.jwksRequests - jwksBefore, 2, 'every certs request is counted, 404s too');
  });

  it('serves the tenants in clients, the realms option, and realms made through its own API', async () => {
    assert.equal((await certs('base')).status, 200);
    assert.equal((await certs('extra')).status, 200);
    assert.equal((await token('base')).status, 200);
    assert.equal((await certs('made')).status, 404);
    const jwt = await em.issueToken({ tenant: 'made', scope: 'openid transcribe' });
    assert.equal((await certs('made')).status, 200);
    const c = await openClient(socketUrl('made', jwt));
    assert.equal(em.sessions.at(-1)!.tenant, 'made');
    c.ws.close();
  });
});
