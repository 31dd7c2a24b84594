// Data residency over real sockets and real emulators: a gateway serves only its environments, checks
// tokens with that environment's auth server only, and sends each session to its own environment's
// upstream; nothing of one environment reaches another's (docs/security.md, 'Data residency').
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { fixture } from '../support/fixtures.js';
import { finals } from '../support/transcripts.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import {
  configured,
  endpointPath,
  englishConfiguration,
  openClient,
  refusal,
  startStack,
  type Stack,
} from '../support/stack.js';

const API = 'environments-api-token';

/** A /transcribe URL for `token`, with `environment` (and a resume key) when given. */
function url(base: string, token: string, o: { environment?: string; resume?: string } = {}): string {
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  if (o.environment) q.set('environment', o.environment);
  if (o.resume) q.set('resume', o.resume);
  return `${base}${endpointPath('transcribe')}?${q}`;
}

const tokenOf = (emulator: Emulator) => emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });

/** A whole dictation through `u`: its final transcripts. */
async function dictate(u: string): Promise<string[]> {
  const client = await openClient(u);
  await configured(client, englishConfiguration('transcribe', 'audio/ogg;codecs=opus'));
  client.send(fixture('dictation.ogg'));
  client.sendJson({ type: 'end' });
  await client.next('ended', 60_000);
  return finals(client.messages).map((f) => f.text);
}

describe('a gateway serving eu only, with a us auth server and upstream running too', () => {
  let stack: Stack;
  let eu: Emulator;
  let us: Emulator;
  beforeAll(async () => {
    [eu, us] = await Promise.all([startEmulator(), startEmulator()]);
    // The one-environment form: UPSTREAM_URL/AUTH_URL are eu's (the default environment's name).
    stack = await startStack({ PACE: '50' }, { emulator: eu });
  });
  afterAll(async () => {
    await stack.close();
    await us.close();
  });

  it('a us token is refused as a token error and reaches no upstream', async () => {
    const r = await refusal(url(stack.base, await tokenOf(us)));
    assert.equal(r.status, 401);
    assert.equal(r.body.error.id, 'TOKEN_INVALID');
    const asUs = await refusal(url(stack.base, await tokenOf(us), { environment: 'eu' }));
    assert.equal(asUs.body.error.id, 'TOKEN_INVALID');
    assert.equal(eu.sessions.length + us.sessions.length, 0, 'no upstream session');
  });

  it('environment=us is refused with ENVIRONMENT_NOT_SERVED before its token is looked at', async () => {
    for (const token of [await tokenOf(us), await tokenOf(eu), 'not.a.jwt']) {
      const r = await refusal(url(stack.base, token, { environment: 'us' }));
      assert.equal(r.status, 403);
      assert.equal(r.body.error.id, 'ENVIRONMENT_NOT_SERVED');
    }
    assert.equal((await refusal(url(stack.base, 'x', { environment: 'EU' }))).body.error.id, 'ENVIRONMENT_NOT_SERVED');
    assert.equal(eu.sessions.length + us.sessions.length, 0, 'no upstream session');
  });

  it('an eu session works end to end, with or without environment=eu', async () => {
    for (const environment of [undefined, 'eu']) {
      const texts = await dictate(url(stack.base, await tokenOf(eu), { environment }));
      assert.ok(texts.length > 0, 'final transcripts');
    }
    assert.equal(eu.sessions.length, 2);
    assert.equal(us.sessions.length, 0);
  });
});

describe('a gateway serving eu and us', () => {
  let stack: Stack;
  let a: Emulator;
  let b: Emulator;
  beforeAll(async () => {
    [a, b] = await Promise.all([startEmulator(), startEmulator()]);
    stack = await startStack({
      ENVIRONMENTS: 'eu,us',
      UPSTREAM_URL_EU: a.wsBase,
      AUTH_URL_EU: a.authBase,
      UPSTREAM_URL_US: b.wsBase,
      AUTH_URL_US: b.authBase,
      USAGE_API_TOKEN: API,
      PACE: '50',
    });
  });
  afterAll(async () => {
    await stack.close();
    await Promise.all([a.close(), b.close()]);
  });

  it("routes each session to its environment's upstream, and the ledger says which", async () => {
    assert.ok((await dictate(url(stack.base, await tokenOf(a)))).length > 0, 'eu (the default) finals');
    assert.ok((await dictate(url(stack.base, await tokenOf(b), { environment: 'us' }))).length > 0, 'us finals');
    assert.equal(a.sessions.length, 1, 'eu upstream: the eu session only');
    assert.equal(b.sessions.length, 1, 'us upstream: the us session only');
    const rows = await endedLedgerSessions(stack, API, { count: 2 });
    assert.deepEqual(rows.map((r) => r.environment).sort(), ['eu', 'us']);
  });

  it("a token of one environment is refused in the other's", async () => {
    assert.equal((await refusal(url(stack.base, await tokenOf(b)))).body.error.id, 'TOKEN_INVALID');
    assert.equal(
      (await refusal(url(stack.base, await tokenOf(a), { environment: 'us' }))).body.error.id,
      'TOKEN_INVALID',
    );
  });

  it("a resume of an eu session asked for in us is refused, and the session stays eu's", async () => {
    const key = randomBytes(18).toString('base64url');
    const first = await openClient(url(stack.base, await tokenOf(a), { resume: key }));
    await configured(first, englishConfiguration('transcribe'));
    const r = await refusal(url(stack.base, await tokenOf(b), { environment: 'us', resume: key }));
    assert.equal(r.status, 403);
    assert.equal(r.body.error.id, 'RESUME_FORBIDDEN');
    first.sendJson({ type: 'end' });
    await first.next('ended');
    assert.equal(b.sessions.length, 1, 'no new us upstream session');
  });
});

describe('embedded emulators, one per environment', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ ENVIRONMENTS: 'eu,us', DEFAULT_ENVIRONMENT: 'us' });
  });
  afterAll(() => stack.close());

  it('each has its own signing keys; the default environment serves requests without one', async () => {
    const { emulators } = stack.gateway;
    assert.deepEqual([...emulators.keys()], ['eu', 'us']);
    const [eu, us] = [emulators.get('eu')!, emulators.get('us')!];
    assert.equal(stack.gateway.emulator, us, 'the default environment');
    assert.equal((await refusal(url(stack.base, await tokenOf(eu)))).body.error.id, 'TOKEN_INVALID');
    const c = await openClient(url(stack.base, await tokenOf(eu), { environment: 'eu' }));
    await configured(c, englishConfiguration('transcribe'));
    c.sendJson({ type: 'end' });
    await c.next('ended');
    assert.deepEqual([eu.sessions.length, us.sessions.length], [1, 0]);
  });
});

describe('environment configuration', () => {
  const bad = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (err) {
      return (err as Error).message;
    }
    return assert.fail(`accepted ${JSON.stringify(env)}`);
  };
  const A = { up: 'wss://eu.example/audio-bridge/v2', auth: 'https://auth.eu.example' };
  const B = { up: 'wss://us.example/audio-bridge/v2', auth: 'https://auth.us.example' };

  it('the forms that start', () => {
    const plain = loadConfig({});
    assert.deepEqual([plain.environments, plain.defaultEnvironment], [[{ name: 'eu' }], 'eu']);
    const one = loadConfig({ UPSTREAM_URL: A.up, AUTH_URL: A.auth, DEFAULT_ENVIRONMENT: 'us' });
    assert.deepEqual(one.environments, [{ name: 'us', upstreamUrl: A.up, authUrl: A.auth }]);
    const two = loadConfig({
      ENVIRONMENTS: 'eu, us',
      UPSTREAM_URL_EU: A.up,
      AUTH_URL_EU: A.auth,
      UPSTREAM_URL_US: 'WSS://us.example/audio-bridge/v2',
      AUTH_URL_US: B.auth,
      DEFAULT_ENVIRONMENT: 'us',
    });
    assert.equal(two.defaultEnvironment, 'us');
    assert.deepEqual(two.environments, [
      { name: 'eu', upstreamUrl: A.up, authUrl: A.auth },
      { name: 'us', upstreamUrl: B.up, authUrl: B.auth },
    ]);
    const dashed = loadConfig({ ENVIRONMENTS: 'eu-west', UPSTREAM_URL_EU_WEST: A.up, AUTH_URL_EU_WEST: A.auth });
    assert.equal(dashed.environments[0].upstreamUrl, A.up);
    assert.equal(loadConfig({ ENVIRONMENTS: 'eu,us' }).environments.length, 2, 'two emulators');
  });

  const cases: Array<[string, Record<string, string>, RegExp]> = [
    [
      'a listed environment without its URLs',
      { ENVIRONMENTS: 'eu,us', UPSTREAM_URL_EU: A.up, AUTH_URL_EU: A.auth },
      /UPSTREAM_URL_US and AUTH_URL_US are unset/,
    ],
    [
      'a half-set pair',
      { ENVIRONMENTS: 'eu', UPSTREAM_URL_EU: A.up },
      /AUTH_URL_EU is unset: set both UPSTREAM_URL_EU and AUTH_URL_EU or neither/,
    ],
    ['a half-set plain pair', { UPSTREAM_URL: A.up }, /AUTH_URL is unset/],
    [
      'an unknown DEFAULT_ENVIRONMENT',
      { ENVIRONMENTS: 'eu,us', DEFAULT_ENVIRONMENT: 'ap' },
      /DEFAULT_ENVIRONMENT must be one of/,
    ],
    ['a bad DEFAULT_ENVIRONMENT name', { DEFAULT_ENVIRONMENT: 'EU' }, /DEFAULT_ENVIRONMENT must match/],
    ['a bad environment name', { ENVIRONMENTS: 'eu,US_1' }, /ENVIRONMENTS entry 2 must match/],
    ['an empty entry', { ENVIRONMENTS: 'eu,' }, /ENVIRONMENTS entry 2 must match/],
    ['a name too long', { ENVIRONMENTS: 'a234567890123456x' }, /ENVIRONMENTS entry 1 must match/],
    ['a duplicate', { ENVIRONMENTS: 'eu,eu' }, /more than once/],
    [
      'URLs of an environment not listed',
      { ENVIRONMENTS: 'eu', UPSTREAM_URL_US: B.up, AUTH_URL_US: B.auth },
      /AUTH_URL_US is set but names no environment.*UPSTREAM_URL_US is set but names no environment/,
    ],
    [
      'both forms for the default environment',
      { UPSTREAM_URL: A.up, AUTH_URL: A.auth, UPSTREAM_URL_EU: A.up, AUTH_URL_EU: A.auth },
      /UPSTREAM_URL\/AUTH_URL and UPSTREAM_URL_EU\/AUTH_URL_EU are both set/,
    ],
    [
      'a bad upstream scheme',
      { UPSTREAM_URL_EU: 'https://x.example', AUTH_URL_EU: A.auth },
      /UPSTREAM_URL_EU must be a ws or wss URL/,
    ],
    [
      'a bad auth scheme',
      { UPSTREAM_URL_EU: A.up, AUTH_URL_EU: 'ftp://x.example' },
      /AUTH_URL_EU must be a http or https URL/,
    ],
  ];
  for (const [name, env, expected] of cases) {
    it(`refuses ${name}, without repeating a value`, () => {
      const message = bad(env);
      assert.match(message, expected);
      for (const v of Object.values(env).filter((x) => x.length > 3 && x !== 'eu,us'))
        assert.ok(!message.includes(v), `"${message}" repeats a value`);
    });
  }
});
