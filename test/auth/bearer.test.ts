// The one `Bearer <token>` parser, shared by the socket auth and the usage API.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { parseBearer } from '../../src/auth/bearer.js';

test('the scheme is case-insensitive and surrounding space is ignored', () => {
  assert.equal(parseBearer('Bearer abc.def'), 'abc.def');
  assert.equal(parseBearer('  bEaReR \t abc.def  '), 'abc.def');
});

test('anything but one scheme and one token is refused', () => {
  for (const bad of [undefined, '', 'Bearer', 'Bearer ', 'abc.def', 'Basic dXNlcjpwYXNz', 'Bearer a b', 'Bearerabc']) {
    assert.equal(parseBearer(bad), undefined, String(bad));
  }
});
