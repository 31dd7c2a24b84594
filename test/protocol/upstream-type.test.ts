import { test } from 'vitest';
import assert from 'node:assert/strict';
import { upstreamMessageType as typeOfBytes } from '../../src/protocol/index.js';

/** The classifier reads bytes, as they come from the upstream. */
const upstreamMessageType = (text: string) => typeOfBytes(Buffer.from(text));

/** What the answer must be: the top-level string `type` as JSON.parse sees it. */
function reference(text: string): string | undefined {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) && typeof v.type === 'string' ? v.type : undefined;
  } catch {
    return undefined;
  }
}

const upstreamShapes = [
  '{"type":"transcript","data":{"text":"Hello.","rawTranscriptText":"hello period","start":0.5,"end":1.2,"isFinal":true}}',
  '{"type":"CONFIG_ACCEPTED","sessionId":"0b1e","configuration":{"primaryLanguage":"en"}}',
  '{"type":"CONFIG_DENIED","reason":"bad"}',
  '{"type":"command","data":{"id":"next","variables":{},"rawTranscriptText":"next","start":1,"end":2}}',
  '{"type":"facts","fact":[{"id":"f","text":"BP 120/80","group":"vitals","groupId":"g","isDiscarded":false,"source":"core","createdAt":"t","updatedAt":"t"}]}',
  '{"type":"delta_usage","credits":0.1}',
  '{"type":"usage","credits":2}',
  '{"type":"flushed"}',
  '{"type":"ended"}',
  '{"type":"ENDED"}',
  '{"type":"error","error":{"id":"x","title":"t","status":400,"details":"d","doc":"u"}}',
];

const tricky = [
  ' \n\t{ "type" :\r\n "transcript" , "data":[] }',
  '{"type":"a\\"b","x":1}',
  '{"type":"caf\\u00e9"}',
  '{"type":"a\\\\"}',
  '{"type":"first","type":"second"}',
  '{"type":"first","\\u0074ype":"second"}',
  '{"type":"first","typ\\u0065":"second"}',
  '{"type":"first","data":{"type":"nested"}}', // nested key; top-level still "first"
  '{"data":{"type":"nested"},"type":"top"}',
  '{"data":{"type":"nested"}}',
  '{"data":"{\\"type\\":\\"fake\\"}","type":"real"}',
  '{"text":"say \\"type\\" now","type":"late"}',
  '{"type":"x","text":"the word \\u0074ype"}',
  '{"type":"transcript","data":{"text":"Gr\\u00fc\\u00dfe"}}',
  '{"type":5}',
  '{"type":null}',
  '{"type":["a"]}',
  '{"type":{"type":"x"}}',
  '{"Type":"upper"}',
  '{"types":"plural"}',
  '{"type":""}',
  '[{"type":"array"}]',
  '"type"',
  'null',
  '{}',
  '{"type":"transcript"',
  'not json',
  '',
  '{"type":"a"}',
  '{"type":"\\u0041"}',
  '{',
  '{"ty',
  '{"type":"café","text":"naïve"}',
  '{"type":"x","t\\u0079pe":"y"}',
  '{"type":"x","\\u0074\\u0079\\u0070\\u0065":"y"}',
  '{"type":"x","text":"\\u00e9","typ\\u0065s":"y"}',
];

test('agrees with JSON.parse on every upstream message shape', () => {
  for (const t of upstreamShapes) assert.equal(upstreamMessageType(t), reference(t), t);
  assert.equal(upstreamMessageType(upstreamShapes[0]), 'transcript');
  assert.equal(upstreamMessageType(upstreamShapes[9]), 'ENDED');
});

test('agrees with JSON.parse on tricky inputs', () => {
  // Text cut short after a JSON-looking start too: it has no type (the session does not relay it).
  for (const t of [...tricky, '{"type":"transcript","data":{"text":"cut', '{"type":"usage" and then prose'])
    assert.equal(upstreamMessageType(t), reference(t), t);
  assert.equal(upstreamMessageType('{"type":"first","\\u0074ype":"second"}'), 'second');
  assert.equal(upstreamMessageType('{"data":{"type":"nested"},"type":"top"}'), 'top');
  assert.equal(upstreamMessageType('{"type":"a\\"b","x":1}'), 'a"b');
});

test('reads invalid UTF-8 in the value as JSON.parse of the decoded text does', () => {
  const bytes = Buffer.concat([Buffer.from('{"type":"a'), Buffer.from([0xff, 0xc3]), Buffer.from('","data":{}}')]);
  assert.equal(typeOfBytes(bytes), reference(bytes.toString('utf8')));
  assert.equal(typeOfBytes(bytes), 'a\ufffd\ufffd');
});

test('agrees with JSON.parse on generated messages (seeded)', () => {
  let seed = 12345;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return (seed >>> 8) % n; // the low bits of this LCG cycle quickly
  };
  const pieces = [
    'type',
    'Type',
    '\\u0074ype',
    'typ\\u0065',
    'data',
    'text',
    'x',
    '\\"',
    'é',
    ' ',
    '\\\\',
    'ENDED',
    '{',
    '}',
    ':',
    ',',
  ];
  const word = () => Array.from({ length: 1 + rand(3) }, () => pieces[rand(pieces.length)]).join('');
  const ws = () => [' ', '', '\n', '', ''][rand(5)];
  const key = () => ['type', 'type', '\\u0074ype', word(), word()][rand(5)];
  const value = (depth: number): string => {
    switch (rand(depth > 1 ? 4 : 6)) {
      case 0:
      case 1:
        return `"${word()}"`;
      case 2:
        return String(rand(100));
      case 3:
        return rand(2) ? 'true' : 'null';
      case 4:
        return `[${value(depth + 1)}]`;
      default:
        return object(depth + 1);
    }
  };
  const object = (depth: number): string => {
    const members = Array.from({ length: rand(4) }, () => `${ws()}"${key()}"${ws()}:${ws()}${value(depth)}${ws()}`);
    return `{${members.join(',')}}`;
  };
  let withType = 0;
  for (let i = 0; i < 20000; i++) {
    const text = ws() + object(0);
    const expected = reference(text);
    assert.notEqual(text.length, 0);
    assert.equal(upstreamMessageType(text), expected, text);
    if (expected !== undefined) withType++;
  }
  // the generator must exercise real answers, not mostly "no type"
  assert.ok(withType > 2500, `only ${withType} generated messages had a string type`);
});
