import { test } from 'vitest';
import assert from 'node:assert/strict';
import { parseClientMessage } from '../../src/protocol/index.js';

test('config, flush and end parse into typed messages', () => {
  assert.deepEqual(parseClientMessage('{"type":"config","configuration":{"primaryLanguage":"en"}}'), {
    ok: true,
    message: { type: 'config', configuration: { primaryLanguage: 'en' } },
  });
  assert.deepEqual(parseClientMessage(' {"type":"flush"} '), { ok: true, message: { type: 'flush' } });
  assert.deepEqual(parseClientMessage('{"type":"end","extra":1}'), { ok: true, message: { type: 'end' } });
});

test('a config message without configuration parses; validateConfig denies it', () => {
  const r = parseClientMessage('{"type":"config"}');
  assert.equal(r.ok, true);
  if (r.ok) assert.equal(r.message.type, 'config');
});

function failure(text: string) {
  const r = parseClientMessage(text);
  assert.equal(r.ok, false, `expected failure for ${text}`);
  if (r.ok) throw new Error('unreachable');
  return r.error;
}

test('malformed JSON is INVALID_MESSAGE and says why, without echoing the input', () => {
  const e = failure('{"type":"config","token":"Bearer secret-abc"');
  assert.equal(e.id, 'INVALID_MESSAGE');
  assert.match(e.details, /^message is not valid JSON: /);
  const e2 = failure('{"type": "Bearer secret-abc" }}');
  assert.match(e2.details, /^message is not valid JSON: Unexpected/);
  assert.doesNotMatch(e2.details, /secret-abc/);
  assert.equal(failure('').id, 'INVALID_MESSAGE');
});

test('non-object messages name what was received', () => {
  assert.equal(failure('[1,2]').details, 'message must be a JSON object (got array)');
  assert.equal(failure('null').details, 'message must be a JSON object (got null)');
  assert.equal(failure('"flush"').details, 'message must be a JSON object (got string)');
  assert.equal(failure('42').id, 'INVALID_MESSAGE');
});

test('missing or non-string type is INVALID_MESSAGE', () => {
  const missing = failure('{"configuration":{}}');
  assert.equal(missing.id, 'INVALID_MESSAGE');
  assert.equal(missing.details, 'field "type" is required');
  const wrong = failure('{"type":7}');
  assert.equal(wrong.id, 'INVALID_MESSAGE');
  assert.equal(wrong.details, 'field "type" must be a string (got number)');
});

test('unknown type is UNKNOWN_MESSAGE_TYPE and lists the known ones', () => {
  const e = failure('{"type":"pause"}');
  assert.equal(e.id, 'UNKNOWN_MESSAGE_TYPE');
  assert.equal(e.status, 400);
  assert.equal(e.details, 'unknown message type "pause"; expected one of "config", "flush", "end"');
  // type names are case-sensitive, as on the upstream
  assert.equal(failure('{"type":"END"}').id, 'UNKNOWN_MESSAGE_TYPE');
});
