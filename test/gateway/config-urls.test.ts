// A URL setting's scheme is case-insensitive, but a client library may not read it so: ioredis turns
// TLS on only for a lower-case `rediss://`, so `REDISS://` would reach Redis in clear. The gateway
// hands every URL on with its scheme lower-cased.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { test } from 'vitest';
import { loadConfig } from '../../src/config.js';

const tlsOf = (url: string) => {
  const r = new Redis(url, { lazyConnect: true });
  const tls = r.options.tls;
  r.disconnect();
  return tls;
};

test('REDISS:// means TLS as rediss:// does', () => {
  assert.equal(tlsOf('REDISS://h.example:6380'), undefined, 'ioredis itself reads the upper-case scheme as plain');
  const { REDIS_URL } = loadConfig({ REDIS_URL: 'REDISS://user:pw@h.example:6380/0' });
  assert.equal(REDIS_URL, 'rediss://user:pw@h.example:6380/0');
  assert.ok(tlsOf(REDIS_URL!), 'TLS on for the URL the gateway hands on');
});

test('the rest of a URL is kept as written', () => {
  const c = loadConfig({ UPSTREAM_URL: 'WSS://Api.Example:443/Audio-Bridge/v2', AUTH_URL: 'HTTPS://Auth.Example' });
  assert.equal(c.UPSTREAM_URL, 'wss://Api.Example:443/Audio-Bridge/v2');
  assert.equal(c.AUTH_URL, 'https://Auth.Example');
});
