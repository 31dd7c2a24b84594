// The status of a tenant refusal is what the README says: a tenant-name that is not a
// valid name is 403 TENANT_INVALID (like the other tenant refusals), a missing one 401 TENANT_MISSING.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { refusal, startStack, type Stack } from '../support/stack.js';

describe('tenant-name refusals through the gateway', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  const url = (params: Record<string, string>) =>
    `${stack.base}/audio-bridge/v2/transcribe?${new URLSearchParams(params)}`;

  it('a tenant-name failing the pattern gets 403 TENANT_INVALID, before any auth server request', async () => {
    const token = `Bearer ${await stack.token('openid transcribe')}`;
    const jwksBefore = stack.emulator.jwksRequests;
    for (const tenant of ['../admin', 'acme corp', 'x'.repeat(65), '..']) {
      const r = await refusal(url({ 'tenant-name': tenant, token }));
      assert.equal(r.status, 403, tenant);
      assert.equal(r.body.error.id, 'TENANT_INVALID');
      assert.equal(r.body.error.status, 403);
    }
    assert.equal(stack.emulator.jwksRequests, jwksBefore);
  });

  it('a missing tenant-name gets 401 TENANT_MISSING', async () => {
    const r = await refusal(url({ token: `Bearer ${await stack.token('openid transcribe')}` }));
    assert.equal(r.status, 401);
    assert.equal(r.body.error.id, 'TENANT_MISSING');
  });
});
