import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { connect, refusedStatus, streamsUrl, transcribeUrl } from './ws-client.js';

describe('emulator socket upgrade', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator();
  });
  afterAll(() => em.close());

  it('opens /transcribe with a valid token in the query and records the token', async () => {
    const token = await em.issueToken({ tenant: 'base' });
    const c = await connect(transcribeUrl(em.wsBase, 'base', token));
    const s = em.sessions.at(-1)!;
    assert.equal(s.endpoint, 'transcribe');
    assert.equal(s.tenant, 'base');
    assert.equal(s.token, token);
    c.ws.close();
  });

  it('accepts Authorization and Tenant-Name headers instead of the query', async () => {
    const token = await em.issueToken({ tenant: 'acme', scope: 'openid streams' });
    const c = await connect(`${em.wsBase}/interactions/3f1c2b1e-8f4a-4c7e-9a7e-2b1d3c4e5f60/streams`, {
      authorization: `Bearer ${token}`,
      'tenant-name': 'acme',
    });
    assert.equal(em.sessions.at(-1)!.interactionId, '3f1c2b1e-8f4a-4c7e-9a7e-2b1d3c4e5f60');
    c.ws.close();
  });

  it('refuses missing, forged, expired, not-yet-valid and unsigned tokens with 401', async () => {
    assert.equal(await refusedStatus(`${em.wsBase}/transcribe?tenant-name=base`), 401);
    for (const o of [
      { signWithUnknownKey: true },
      { expiresInSeconds: -5 },
      { notBeforeSeconds: 120 },
      { alg: 'HS256' as const },
      { alg: 'none' as const },
      { issuer: 'http://elsewhere/realms/base' },
    ]) {
      const token = await em.issueToken({ tenant: 'base', ...o });
      assert.equal(await refusedStatus(transcribeUrl(em.wsBase, 'base', token)), 401, JSON.stringify(o));
    }
  });

  it('refuses a token of another tenant (401) and a scope for the other endpoint (403)', async () => {
    const acme = await em.issueToken({ tenant: 'acme' });
    assert.equal(await refusedStatus(transcribeUrl(em.wsBase, 'base', acme)), 401);
    const streamsOnly = await em.issueToken({ tenant: 'base', scope: 'openid streams' });
    assert.equal(await refusedStatus(transcribeUrl(em.wsBase, 'base', streamsOnly)), 403);
    const transcribeOnly = await em.issueToken({ tenant: 'base', scope: 'openid transcribe' });
    assert.equal(await refusedStatus(streamsUrl(em.wsBase, 'base', transcribeOnly)), 403);
    (await connect(transcribeUrl(em.wsBase, 'base', transcribeOnly))).ws.close();
  });

  it('answers unknown paths and non-uuid interactions with 404', async () => {
    const token = await em.issueToken({ tenant: 'base' });
    assert.equal(
      await refusedStatus(`${em.wsBase}/dictate?tenant-name=base&token=${encodeURIComponent('Bearer ' + token)}`),
      404,
    );
    assert.equal(await refusedStatus(streamsUrl(em.wsBase, 'base', token, 'not-a-uuid')), 404);
  });

  it('rejects upgrades with the status set in faults.rejectUpgradeStatus', async () => {
    const token = await em.issueToken({ tenant: 'base' });
    em.faults.rejectUpgradeStatus = 503;
    try {
      assert.equal(await refusedStatus(transcribeUrl(em.wsBase, 'base', token)), 503);
    } finally {
      em.faults.rejectUpgradeStatus = null;
    }
  });
});
