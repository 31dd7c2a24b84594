import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createUpstreamCredentials, loadUpstreamCredentials } from '../../src/auth/index.js';
import { startAuthServer, type TestAuthServer } from './auth-server.js';

let srv: TestAuthServer;
beforeAll(async () => {
  srv = await startAuthServer();
  srv.addClient('acme', 'gw', 'gw-secret');
  srv.addClient('globex', 'gw-any', 'any-secret');
});
afterAll(() => srv.close());

describe('upstream credentials', () => {
  it('passthrough returns the client token', async () => {
    const c = createUpstreamCredentials({ mode: 'passthrough', authUrl: srv.url });
    assert.equal(await c.tokenFor('acme', 'client.jwt.value'), 'client.jwt.value');
  });

  it('client-credentials: cached, refreshed before expiry, shared while in flight', async () => {
    let clock = 1_000_000;
    srv.tokenLifetimeSeconds = 300;
    const c = createUpstreamCredentials({
      mode: 'client-credentials',
      authUrl: srv.url,
      credentials: { acme: { clientId: 'gw', clientSecret: 'gw-secret' } },
      refreshBeforeSeconds: 60,
      now: () => clock,
    });
    const first = await Promise.all(Array.from({ length: 20 }, () => c.tokenFor('acme', 'client-token')));
    assert.equal(new Set(first).size, 1);
    assert.notEqual(first[0], 'client-token');
    assert.equal(srv.tokenRequests.get('acme'), 1);

    clock += 200_000; // 100 s left: still cached
    assert.equal(await c.tokenFor('acme', 'x'), first[0]);
    assert.equal(srv.tokenRequests.get('acme'), 1);

    clock += 50_000; // 50 s left (< 60): refreshed
    const second = await c.tokenFor('acme', 'x');
    assert.notEqual(second, first[0]);
    assert.equal(srv.tokenRequests.get('acme'), 2);
    c.close();
  });

  it('short-lived tokens are not refetched on every call', async () => {
    let clock = 5_000_000;
    srv.tokenLifetimeSeconds = 30; // shorter than refreshBeforeSeconds
    try {
      const c = createUpstreamCredentials({
        mode: 'client-credentials',
        authUrl: srv.url,
        credentials: { '*': { clientId: 'gw-any', clientSecret: 'any-secret' } },
        now: () => clock,
      });
      const t = await c.tokenFor('globex', 'x');
      clock += 5_000;
      assert.equal(await c.tokenFor('globex', 'x'), t);
      clock += 20_000;
      assert.notEqual(await c.tokenFor('globex', 'x'), t);
      assert.equal(srv.tokenRequests.get('globex'), 2);
    } finally {
      srv.tokenLifetimeSeconds = 300;
    }
  });

  it('a refused token request names tenant and status but not the secret', async () => {
    const c = createUpstreamCredentials({
      mode: 'client-credentials',
      authUrl: srv.url,
      credentials: { acme: { clientId: 'gw', clientSecret: 'wrong-secret-value' } },
    });
    await assert.rejects(c.tokenFor('acme', 'x'), (err: Error) => {
      assert.match(err.message, /acme/);
      assert.match(err.message, /401/);
      assert.ok(!err.message.includes('wrong-secret-value'));
      return true;
    });
  });

  it('a tenant without credentials is an error; client-credentials without any is refused at creation', async () => {
    const c = createUpstreamCredentials({
      mode: 'client-credentials',
      authUrl: srv.url,
      credentials: { acme: { clientId: 'gw', clientSecret: 'gw-secret' } },
    });
    await assert.rejects(c.tokenFor('globex', 'x'), /globex/);
    assert.throws(
      () => createUpstreamCredentials({ mode: 'client-credentials', authUrl: srv.url }),
      /UPSTREAM_CREDENTIALS/,
    );
  });
});

describe('loadUpstreamCredentials', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-creds-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads a file and inline JSON', () => {
    const file = join(dir, 'ok.json');
    writeFileSync(file, JSON.stringify({ acme: { clientId: 'gw', clientSecret: 's3cret' } }));
    assert.deepEqual(loadUpstreamCredentials({ file }), { acme: { clientId: 'gw', clientSecret: 's3cret' } });
    assert.deepEqual(loadUpstreamCredentials({ inline: '{"*":{"clientId":"a","clientSecret":"b"}}' }), {
      '*': { clientId: 'a', clientSecret: 'b' },
    });
    assert.deepEqual(loadUpstreamCredentials({}), {});
  });

  it('malformed input fails clearly without echoing secrets', () => {
    const secret = 'super-secret-do-not-print';
    const cases = [
      `{"acme":{"clientId":"gw","clientSecret":"${secret}"`, // truncated JSON
      `{"acme":{"clientId":"gw","client_secret":"${secret}"}}`, // wrong field name
      `{"../x":{"clientId":"gw","clientSecret":"${secret}"}}`, // unsafe tenant
    ];
    for (const inline of cases) {
      assert.throws(
        () => loadUpstreamCredentials({ inline }),
        (err: Error) => {
          assert.match(err.message, /UPSTREAM_CREDENTIALS/);
          assert.ok(!err.message.includes(secret), err.message);
          return true;
        },
      );
    }
    assert.throws(() => loadUpstreamCredentials({ file: join(dir, 'missing.json') }), /cannot read file \(ENOENT\)/);
  });
});
