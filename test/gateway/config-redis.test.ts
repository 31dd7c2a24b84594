// Redis is REDIS_URL (one Redis), REDIS_SENTINELS + REDIS_SENTINEL_NAME (a primary found through
// Sentinel) or REDIS_CLUSTER_NODES (a Redis Cluster), one of them; the data nodes' credentials are
// variables of their own for Sentinel and Cluster, the sentinels' for Sentinel only. Each mistake
// names the variable, and no message repeats a value (passwords).
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { redisSettings } from '../../src/redis/index.js';

const SECRET = 'pw-must-never-be-echoed';

/** The message loadConfig throws for `env`; it never holds SECRET. */
function problems(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    const message = (err as Error).message;
    assert.ok(!message.includes(SECRET), `a value is in the message: ${message}`);
    return message;
  }
  assert.fail('the configuration was accepted');
}

test('Sentinel: its addresses parsed, its name and credentials handed on as one settings object', () => {
  const c = loadConfig({
    REDIS_SENTINELS: 'sentinel-0.example:26379, 10.0.0.7:26380,[fd00::1]:26381',
    REDIS_SENTINEL_NAME: 'gateway-primary',
    REDIS_USERNAME: 'gateway',
    REDIS_PASSWORD: SECRET,
    REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
    REDIS_SENTINEL_TLS: 'true',
  });
  assert.deepEqual(redisSettings(c), {
    sentinels: [
      { host: 'sentinel-0.example', port: 26379 },
      { host: '10.0.0.7', port: 26380 },
      { host: 'fd00::1', port: 26381 },
    ],
    name: 'gateway-primary',
    username: 'gateway',
    password: SECRET,
    sentinelPassword: 'sentinel-pw',
    tls: true,
  });
  assert.deepEqual(redisSettings(loadConfig({ REDIS_URL: 'redis://r:6379' })), { url: 'redis://r:6379' });
  assert.equal(redisSettings(loadConfig({})), undefined);
});

test('REDIS_SENTINELS and REDIS_SENTINEL_NAME go together', () => {
  assert.match(problems({ REDIS_SENTINELS: 's:26379' }), /REDIS_SENTINEL_NAME is unset: Sentinel needs both/);
  assert.match(problems({ REDIS_SENTINEL_NAME: 'p' }), /REDIS_SENTINELS is unset: Sentinel needs both/);
  assert.match(
    problems({ REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_TLS: 'true' }),
    /REDIS_SENTINEL_TLS is set without REDIS_SENTINELS/,
  );
});

test('REDIS_URL or Sentinel, not both', () => {
  const both = problems({
    REDIS_URL: `redis://:${SECRET}@r:6379`,
    REDIS_SENTINELS: 's:26379',
    REDIS_SENTINEL_NAME: 'p',
  });
  assert.match(both, /REDIS_URL is set with Sentinel/);
});

test('malformed sentinel addresses are refused without their value', () => {
  for (const bad of [`${SECRET}`, 's:0', 's:65536', 's:26379,', 'redis://s:26379', 'fd00::1:26379', 's :1']) {
    assert.match(
      problems({ REDIS_SENTINELS: bad, REDIS_SENTINEL_NAME: 'p' }),
      /REDIS_SENTINELS must be comma-separated host:port/,
      bad,
    );
  }
  assert.match(problems({ REDIS_SENTINELS: 's:1', REDIS_SENTINEL_NAME: 'a b' }), /REDIS_SENTINEL_NAME must be 1-100/);
});

test('the Sentinel credentials are for Sentinel only, and a user needs its password', () => {
  for (const name of ['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_SENTINEL_PASSWORD']) {
    const message = problems({ REDIS_URL: 'redis://r:6379', [name]: SECRET, REDIS_PASSWORD: SECRET });
    assert.match(message, new RegExp(`${name} is set without REDIS_SENTINELS`));
  }
  const sentinel = { REDIS_SENTINELS: 's:1', REDIS_SENTINEL_NAME: 'p' };
  assert.match(problems({ ...sentinel, REDIS_USERNAME: 'u' }), /REDIS_USERNAME is set without REDIS_PASSWORD/);
  assert.match(problems({ ...sentinel, REDIS_PASSWORD: `${SECRET}\n` }), /REDIS_PASSWORD must contain no whitespace/);
});

test("Cluster: its nodes parsed, with the data nodes' credentials and TLS", () => {
  const c = loadConfig({
    REDIS_CLUSTER_NODES: 'redis-0.example:6379, 10.0.0.7:6380,[fd00::1]:6381',
    REDIS_USERNAME: 'gateway',
    REDIS_PASSWORD: SECRET,
    REDIS_CLUSTER_TLS: 'true',
  });
  assert.deepEqual(redisSettings(c), {
    clusterNodes: [
      { host: 'redis-0.example', port: 6379 },
      { host: '10.0.0.7', port: 6380 },
      { host: 'fd00::1', port: 6381 },
    ],
    username: 'gateway',
    password: SECRET,
    tls: true,
  });
  assert.deepEqual(redisSettings(loadConfig({ REDIS_CLUSTER_NODES: 'r:6379' })), {
    clusterNodes: [{ host: 'r', port: 6379 }],
    username: undefined,
    password: undefined,
    tls: false,
  });
});

test('REDIS_CLUSTER_NODES is exclusive with REDIS_URL and with Sentinel', () => {
  assert.match(
    problems({ REDIS_CLUSTER_NODES: 'r:6379', REDIS_URL: `redis://:${SECRET}@r:6379` }),
    /REDIS_CLUSTER_NODES is set with REDIS_URL: set one of/,
  );
  assert.match(
    problems({ REDIS_CLUSTER_NODES: 'r:6379', REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_NAME: 'p' }),
    /REDIS_CLUSTER_NODES is set with Sentinel: set one of/,
  );
  assert.match(
    problems({ REDIS_CLUSTER_NODES: 'r:6379', REDIS_SENTINEL_PASSWORD: SECRET }),
    /REDIS_SENTINEL_PASSWORD is set without REDIS_SENTINELS/,
  );
  assert.match(
    problems({ REDIS_CLUSTER_NODES: 'r:6379', REDIS_USERNAME: 'u' }),
    /REDIS_USERNAME is set without REDIS_PASSWORD/,
  );
  assert.match(
    problems({ REDIS_URL: 'redis://r:6379', REDIS_CLUSTER_TLS: 'true' }),
    /REDIS_CLUSTER_TLS is set without REDIS_CLUSTER_NODES/,
  );
  assert.match(
    problems({ REDIS_CLUSTER_NODES: 'r:6379', REDIS_CLUSTER_TLS: 'yes' }),
    /REDIS_CLUSTER_TLS must be one of/,
  );
});

test('malformed cluster node addresses are refused without their value', () => {
  for (const bad of [
    `${SECRET}`,
    'r:0',
    'r:65536',
    'r:6379,',
    'redis://r:6379',
    'fd00::1:6379',
    'r :1',
    `${SECRET}:6379 x`,
  ]) {
    assert.match(problems({ REDIS_CLUSTER_NODES: bad }), /REDIS_CLUSTER_NODES must be comma-separated host:port/, bad);
  }
});
