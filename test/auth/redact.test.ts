import { describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { redactUrl } from '../../src/auth/index.js';

const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJl';

describe('redactUrl', () => {
  it('removes the token from a socket URL, keeping the rest', () => {
    const url = `/audio-bridge/v2/transcribe?tenant-name=acme&token=Bearer%20${jwt}&environment=eu`;
    const out = redactUrl(url);
    assert.equal(out, '/audio-bridge/v2/transcribe?tenant-name=acme&token=[redacted]&environment=eu');
  });

  it('removes other credential parameters', () => {
    const out = redactUrl('grant_type=client_credentials&client_id=gw&client_secret=s3cret&access_token=abc');
    assert.equal(out, 'grant_type=client_credentials&client_id=gw&client_secret=[redacted]&access_token=[redacted]');
  });

  it('removes the Authorization value from Sec-WebSocket-Protocol pairs', () => {
    const out = redactUrl(`Authorization, Bearer%20${jwt}, Tenant-Name, acme`);
    assert.equal(out, 'Authorization, [redacted], Tenant-Name, acme');
  });

  it('removes bearer credentials and bare JWTs anywhere', () => {
    assert.ok(!redactUrl(`header Bearer ${jwt}`).includes('eyJ'));
    assert.ok(!redactUrl(`see ${jwt} here`).includes('c2lnbmF0dXJl'));
  });

  it('leaves URLs without credentials unchanged', () => {
    const url = 'https://auth.eu.corti.app/realms/acme/protocol/openid-connect/certs?x=1';
    assert.equal(redactUrl(url), url);
  });
});
