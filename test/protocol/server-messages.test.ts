import { test } from 'vitest';
import assert from 'node:assert/strict';
import { configTimeoutType, errorMessage, serverMessages } from '../../src/protocol/index.js';

test('config status messages carry only the fields given', () => {
  assert.equal(
    JSON.stringify(
      serverMessages.configStatus('CONFIG_DENIED', { reason: 'configuration.primaryLanguage: is required' }),
    ),
    '{"type":"CONFIG_DENIED","reason":"configuration.primaryLanguage: is required"}',
  );
  assert.equal(JSON.stringify(serverMessages.configStatus('CONFIG_TIMEOUT')), '{"type":"CONFIG_TIMEOUT"}');
  assert.deepEqual(
    serverMessages.configStatus('CONFIG_ACCEPTED', { sessionId: 's-1', configuration: { primaryLanguage: 'en' } }),
    { type: 'CONFIG_ACCEPTED', sessionId: 's-1', configuration: { primaryLanguage: 'en' } },
  );
});

test('flush, usage and end messages have the upstream shapes', () => {
  assert.equal(JSON.stringify(serverMessages.flushed()), '{"type":"flushed"}');
  assert.equal(JSON.stringify(serverMessages.deltaUsage(0.25)), '{"type":"delta_usage","credits":0.25}');
  assert.equal(JSON.stringify(serverMessages.usage(3)), '{"type":"usage","credits":3}');
  assert.equal(JSON.stringify(serverMessages.ended('transcribe')), '{"type":"ended"}');
  assert.equal(JSON.stringify(serverMessages.ended('streams')), '{"type":"ENDED"}');
});

test('the config timeout message differs per socket: CONFIG_TIMEOUT on /transcribe, CONFIG_NOT_PROVIDED on /streams', () => {
  assert.equal(configTimeoutType('transcribe'), 'CONFIG_TIMEOUT');
  assert.equal(configTimeoutType('streams'), 'CONFIG_NOT_PROVIDED');
});

test('errors use the upstream socket error shape', () => {
  const m = errorMessage('INVALID_MESSAGE', 'field "type" is required');
  assert.deepEqual(Object.keys(m.error).sort(), ['details', 'doc', 'id', 'status', 'title']);
  assert.equal(m.type, 'error');
});
