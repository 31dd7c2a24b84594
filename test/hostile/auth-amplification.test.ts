// No amplification: forged tokens naming a new random tenant each must not turn into one
// auth server request (and, with the embedded emulator, one key pair) each, and must not slow down
// the tenants that already work.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { forgedJwt } from '../support/jwt.js';
import { refusal, startStack, type Stack, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';

/** What a forger can make without any key: a well-formed JWT whose issuer names the tenant. */
function forgedToken(authBase: string, tenant: string): string {
  return forgedJwt(
    { alg: 'RS256', typ: 'JWT', kid: 'forged' },
    { iss: `${authBase}/realms/${tenant}`, exp: Math.floor(Date.now() / 1000) + 300, scope: 'openid transcribe' },
  );
}

async function dictation(c: TestClient): Promise<void> {
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
  await c.next('CONFIG_ACCEPTED');
  c.sendJson({ type: 'end' });
  await c.next('ended');
}

describe('forged tokens for random tenants', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('2,000 of them cost a few JWKS requests and no new realms, and tenant base keeps working meanwhile', async () => {
    const em = stack.emulator;
    await dictation(await stack.connect('transcribe')); // base is a tenant that has signed in before
    const realmsBefore = em.realms().sort();
    const jwksBefore = em.jwksRequests;
    const started = Date.now();
    const refusals: Array<{ status: number; body: any }> = [];
    const spray = async () => {
      for (let i = 0; i < 2000; i += 50) {
        const batch = Array.from({ length: 50 }, (_, k) => {
          const tenant = `t${i + k}-${randomBytes(4).toString('hex')}`;
          const q = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${forgedToken(em.authBase, tenant)}` });
          return refusal(`${stack.base}/audio-bridge/v2/transcribe?${q}`);
        });
        refusals.push(...(await Promise.all(batch)));
      }
    };
    const meanwhile = async () => {
      while (refusals.length < 500) await delay(20);
      const t0 = Date.now();
      await dictation(await stack.connect('transcribe'));
      return Date.now() - t0;
    };
    const [, baseMs] = await Promise.all([spray(), meanwhile()]);
    const seconds = (Date.now() - started) / 1000;

    const jwks = em.jwksRequests - jwksBefore;
    assert.ok(
      jwks <= 10 + 5 * Math.ceil(seconds),
      `${jwks} JWKS requests in ${seconds.toFixed(1)} s (budget: burst 10, 5 a second)`,
    );
    assert.deepEqual(em.realms().sort(), realmsBefore, 'the emulator made no realm for a forged tenant');
    assert.ok(baseMs < 2000, `a base session took ${baseMs} ms to set up during the spray`);
    assert.equal(refusals.length, 2000);
    for (const r of refusals) {
      const id = r.body.error?.id;
      assert.ok(
        (r.status === 401 && id === 'TOKEN_INVALID') || (r.status === 503 && id === 'AUTH_UNAVAILABLE'),
        JSON.stringify(r),
      );
    }
    const busy = refusals.filter((r) => r.status === 503);
    assert.ok(busy.length > 0 && busy.every((r) => /retry/.test(r.body.error.details)));
  }, 30_000);
});
