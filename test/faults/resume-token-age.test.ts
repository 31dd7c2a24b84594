// How old an expired token a resume may present: at most the resume grace plus the token's own
// lifetime (exp - iat) past its expiry. A session a client resumes started before its token expired
// and waits at most the grace, so an older token cannot belong to a client coming back; it gets
// 401 TOKEN_EXPIRED like any expired token. Real tokens, a real JWKS endpoint, a real gateway.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAuthenticator, type AuthDecision } from '../../src/auth/index.js';
import { startAuthServer, type SigningKey, type TestAuthServer } from '../auth/auth-server.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, refusal, resumeUrl, startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const GRACE = 30;
const TOLERANCE = 30; // the authenticator's clock tolerance

describe('authenticate(req, { allowExpired: true }): the age bound', () => {
  let srv: TestAuthServer;
  let key: SigningKey;
  beforeAll(async () => {
    srv = await startAuthServer();
    key = await srv.addKey('acme');
  });
  afterAll(() => srv.close());

  const auth = () =>
    createAuthenticator({
      authUrl: srv.url,
      allowedOrigins: 'same-origin',
      allowFullAccessFromBrowsers: false,
      resumeGraceSeconds: GRACE,
    });
  const resume = async (o: { issuedAt?: number; expiresIn: number }): Promise<AuthDecision> => {
    const token = await srv.sign('acme', key, { scope: 'openid transcribe', sub: 'user-1' }, o);
    const query = new URLSearchParams({ 'tenant-name': 'acme', token: `Bearer ${token}` });
    return auth().authenticate(
      { endpoint: 'transcribe', query, headers: { host: 'gw.example' } },
      { allowExpired: true },
    );
  };

  it('a 5-minute token expired up to grace + 5 min ago: accepted as expired', async () => {
    for (const ago of [120, 300 + GRACE - 5]) {
      const d = await resume({ issuedAt: -300 - ago, expiresIn: -ago });
      assert.ok(d.ok && d.expired, `expired ${ago} s ago: ${JSON.stringify(d)}`);
    }
  });

  it('a 5-minute token expired longer than grace + 5 min (+ the clock tolerance) ago: 401 TOKEN_EXPIRED', async () => {
    const ago = 300 + GRACE + TOLERANCE + 5;
    const d = await resume({ issuedAt: -300 - ago, expiresIn: -ago });
    assert.equal(d.ok, false, JSON.stringify(d));
    if (d.ok) return;
    assert.equal(d.status, 401);
    assert.equal(d.error.id, 'TOKEN_EXPIRED');
    assert.match(d.error.details, /too long ago/);
  });

  it('a token whose lifetime is unknown (no iat, or iat after exp) gets the grace only', async () => {
    assert.equal((await resume({ issuedAt: Number.NaN, expiresIn: -(GRACE + TOLERANCE + 5) })).ok, false, 'no iat');
    assert.equal((await resume({ issuedAt: 0, expiresIn: -(GRACE + TOLERANCE + 5) })).ok, false, 'iat after exp');
    assert.equal(
      (await resume({ issuedAt: Number.NaN, expiresIn: -(GRACE + 5) })).ok,
      true,
      'no iat, within the grace',
    );
  });
});

describe('a resume through the gateway with a token expired too long ago', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ RESUME_GRACE_SECONDS: '30' });
  });
  afterAll(() => stack.close());

  it('is refused 401 TOKEN_EXPIRED although its session waits for it; a fresh token resumes it', async () => {
    const key = newResumeKey();
    const url = (token: string) => resumeUrl(stack.base, 'base', key, token);
    const first = await openClient(url(await stack.token('openid transcribe')));
    first.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' } });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of chromeChunks('webm-opus').slice(0, 6)) first.send(piece);
    await delay(300);
    first.ws.terminate(); // the session waits for its client (30 s)
    await delay(300);

    // The emulator's tokens say iat = now: this one's lifetime is unknown, so the grace (+ tolerance) bounds it.
    const old = await stack.emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', expiresInSeconds: -120 });
    const r = await refusal(url(old));
    assert.equal(r.status, 401);
    assert.equal(r.body.error.id, 'TOKEN_EXPIRED');

    const second = await openClient(url(await stack.token('openid transcribe')));
    second.sendJson({
      type: 'config',
      configuration: { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' },
    });
    assert.equal((await second.next('CONFIG_ACCEPTED')).resumed, true, 'the session was there to resume');
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
  });
});
