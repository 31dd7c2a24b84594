// Hostile review, protocol side: what a config may carry is bounded (depth, size, string lengths,
// items, fields), client text is bounded before JSON.parse, and every reason or error quotes at most
// a short, escaped prefix of what the client sent. Large but legal configs still pass.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { echo, MAX_CLIENT_TEXT_BYTES, parseClientMessage, validateConfig } from '../../src/protocol/index.js';
import { accepted, denied } from '../support/config-validation.js';

const MB10 = 10 * 1024 * 1024;
const transcribe = { primaryLanguage: 'en' };
const streams = { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' } };

/** `[[[ … 1 … ]]]` `levels` deep, built without recursion. */
function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

describe('config nesting is bounded without recursion', () => {
  for (const levels of [5_000, 1_000_000]) {
    it(`an unknown field nested ${levels} levels deep is denied with a depth reason, no exception`, () => {
      assert.equal(
        denied('transcribe', { ...transcribe, x: nested(levels) }),
        'configuration.x[0][0][0][0][0][0][0][0][0][0]: nested more than 10 levels deep',
      );
    });
  }

  it('the same through parseClientMessage, from the text a client sends (10 KB)', () => {
    const text = `{"type":"config","configuration":{"primaryLanguage":"en","x":${'['.repeat(5_000)}${']'.repeat(5_000)}}}`;
    const parsed = parseClientMessage(text);
    assert.ok(parsed.ok && parsed.message.type === 'config');
    assert.match(
      denied('transcribe', parsed.message.configuration),
      /^configuration\.x(\[0\]){10}: nested more than 10 levels deep$/,
    );
  });

  it('deep objects too, with a hostile field name quoted and escaped in the path', () => {
    let deep: Record<string, unknown> = {};
    const top = deep;
    for (let i = 0; i < 20; i++) deep = deep.a = {};
    const reason = denied('streams', { ...streams, 'evil\u202e\nkey': top });
    assert.equal(reason, 'configuration["evil\\u202e\\nkey"].a.a.a.a.a.a.a.a.a.a: nested more than 10 levels deep');
  });

  it('the deepest real config (commands[].variables[].enum) is well within the limit', () => {
    accepted('transcribe', {
      ...transcribe,
      commands: [{ id: 'go', phrases: ['go to {s}'], variables: [{ key: 's', type: 'enum', enum: ['a'] }] }],
    });
  });
});

describe('config strings, items, fields and size are bounded', () => {
  it('a 10 MB primaryLanguage is denied naming the field and its limit', () => {
    assert.equal(
      denied('transcribe', { primaryLanguage: 'e'.repeat(MB10) }),
      `configuration.primaryLanguage: at most 35 characters (got ${MB10})`,
    );
    assert.equal(
      denied('streams', { ...streams, transcription: { primaryLanguage: 'e'.repeat(MB10) } }),
      `configuration.transcription.primaryLanguage: at most 35 characters (got ${MB10})`,
    );
    assert.match(
      denied('streams', { ...streams, mode: { type: 'facts', outputLocale: 'x'.repeat(36) } }),
      /^configuration\.mode\.outputLocale: at most 35 characters/,
    );
  });

  it('a 10 MB audioFormat is denied by its length, never echoed', () => {
    const reason = denied('transcribe', { ...transcribe, audioFormat: `audio/${'a'.repeat(MB10)}` });
    assert.equal(reason, `configuration.audioFormat: at most 255 characters (got ${MB10 + 6})`);
  });

  it('an unsupported audioFormat is rejected with an echo of at most 40 characters and its length', () => {
    const r = validateConfig('transcribe', { ...transcribe, audioFormat: `audio/x-${'b'.repeat(240)}\u0007` });
    assert.deepEqual(r, {
      ok: false,
      status: 'rejected',
      reason: `configuration.audioFormat: unsupported audio format "audio/x-${'b'.repeat(32)}…" (249 chars)`,
    });
  });

  it('any string (unknown fields included) has a general cap; so do field names', () => {
    assert.equal(
      denied('transcribe', { ...transcribe, note: 'z'.repeat(MB10) }),
      `configuration.note: at most 1000 characters (got ${MB10})`,
    );
    assert.equal(
      denied('transcribe', { ...transcribe, commands: [{ id: 'c', phrases: ['p'.repeat(1001)] }] }),
      'configuration.commands[0].phrases[0]: at most 1000 characters (got 1001)',
    );
    const reason = denied('transcribe', { ...transcribe, ['k'.repeat(5000)]: 1 });
    assert.equal(
      reason,
      `configuration["${'k'.repeat(40)}…" (5000 chars)]: field name at most 1000 characters (got 5000)`,
    );
  });

  it('arrays and objects anywhere: at most 1000 items and 100 fields', () => {
    assert.equal(
      denied('transcribe', { ...transcribe, extra: { list: new Array(1001).fill(0) } }),
      'configuration.extra.list: at most 1000 items (got 1001)',
    );
    assert.equal(
      denied('transcribe', {
        ...transcribe,
        commands: Array.from({ length: 1001 }, (_, i) => ({ id: `c${i}`, phrases: ['go'] })),
      }),
      'configuration.commands: at most 1000 items (got 1001)',
    );
    const wide = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`f${i}`, i]));
    assert.equal(denied('streams', { ...streams, wide }), 'configuration.wide: at most 100 fields (got 101)');
  });

  it('the whole configuration is at most 256 KiB as JSON, and the reason says where it passed that', () => {
    const commands = Array.from({ length: 300 }, (_, i) => ({ id: `c${i}`, phrases: ['p'.repeat(900)] }));
    assert.match(
      denied('transcribe', { ...transcribe, commands }),
      /^configuration: at most 262144 bytes as JSON \(passed at configuration\.commands\[\d+\]/,
    );
  });

  it('big but legal configs are accepted: 1,000 keyterms of 50 characters and 1,000 replacements', () => {
    const term = (i: number) => `${String(i).padStart(4, '0')} ${'k'.repeat(45)}`; // 50 characters, 2 words
    const keyterms = { terms: Array.from({ length: 1000 }, (_, i) => ({ term: term(i) })) };
    const phrase = (i: number) => `r${i} ${'p'.repeat(44)}`.slice(0, 50);
    const replacements = Array.from({ length: 1000 }, (_, i) => ({ find: phrase(i), replace: phrase(i + 1) }));
    const streamsFull = { ...streams, keyterms, replacements };
    assert.ok(JSON.stringify(streamsFull).length > 180_000, 'this is the largest legal /streams list content');
    accepted('streams', streamsFull);
    accepted('transcribe', { ...transcribe, keyterms, replacements });
  });
});

describe('client text is bounded before JSON.parse', () => {
  it(`a text over ${MAX_CLIENT_TEXT_BYTES} bytes is refused, flagged tooLarge, without being parsed`, () => {
    const text = `{"type":"config","configuration":{"primaryLanguage":"${'e'.repeat(MB10)}"}}`;
    const r = parseClientMessage(text);
    assert.equal(r.ok, false);
    if (r.ok) throw new Error('unreachable');
    assert.equal(r.tooLarge, true);
    assert.equal(r.error.id, 'INVALID_MESSAGE');
    assert.equal(r.error.details, `message of ${text.length} bytes is larger than the 524288-byte limit`);
  });

  it('counts UTF-8 bytes, not characters; a message at the limit is read', () => {
    const pad = (n: number) => `{"type":"flush","p":"${'é'.repeat(n)}"}`; // 23 bytes around n two-byte characters
    const fits = Math.floor((MAX_CLIENT_TEXT_BYTES - 23) / 2);
    assert.deepEqual(parseClientMessage(pad(fits)), { ok: true, message: { type: 'flush' } });
    const over = parseClientMessage(pad(fits + 1));
    assert.ok(!over.ok && over.tooLarge);
    assert.equal(over.error.details, `message of ${23 + 2 * (fits + 1)} bytes is larger than the 524288-byte limit`);
  });

  it('a million-level array in the text is refused by size, not by the stack', () => {
    const r = parseClientMessage(
      `{"type":"config","configuration":{"x":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}}`,
    );
    assert.ok(!r.ok && r.tooLarge);
  });
});

describe('client input in errors: one short, escaped echo', () => {
  it('echo quotes short input whole and cuts long input at 40 characters with its length', () => {
    assert.equal(echo('summary'), '"summary"');
    assert.equal(echo('a'.repeat(40)), `"${'a'.repeat(40)}"`);
    assert.equal(echo('a'.repeat(MB10)), `"${'a'.repeat(40)}…" (${MB10} chars)`);
    assert.equal(
      echo('say "hi"\\\n\u0000\u007f\u009b\u2028\u202e'),
      '"say \\"hi\\"\\\\\\n\\u0000\\u007f\\u009b\\u2028\\u202e"',
    );
    assert.equal(echo(`${'a'.repeat(39)}😀tail`), `"${'a'.repeat(39)}…" (45 chars)`, 'a surrogate pair is never split');
  });

  it('unknown message types, zod reasons and command ids quote through it', () => {
    const long = `x${'"'.repeat(5000)}`;
    const r = parseClientMessage(JSON.stringify({ type: long }));
    assert.ok(!r.ok);
    assert.equal(
      r.error.details,
      `unknown message type "x${'\\"'.repeat(39)}…" (5001 chars); expected one of "config", "flush", "end"`,
    );
    assert.equal(
      denied('streams', { ...streams, retentionPolicy: 'f'.repeat(900) }),
      `configuration.retentionPolicy: must be one of "none", "retain" (got "${'f'.repeat(40)}…" (900 chars))`,
    );
    const dup = 'd'.repeat(999);
    assert.equal(
      denied('transcribe', {
        ...transcribe,
        commands: [
          { id: dup, phrases: ['a'] },
          { id: dup, phrases: ['b'] },
        ],
      }),
      `configuration.commands[1].id: duplicate command id "${'d'.repeat(40)}…" (999 chars) (also commands[0].id)`,
    );
  });

  it("malformed JSON: V8's excerpt of the input is dropped, even when V8 cuts it with ...", () => {
    for (const text of [
      '{"type": "Bearer secret-abc" }}',
      `Bearer secret-abc ${'x'.repeat(100)}`,
      `{"a":1, "b": ${'1'.repeat(30)}Bearer secret-abc${'1'.repeat(30)}}`,
    ]) {
      const r = parseClientMessage(text);
      assert.ok(!r.ok);
      assert.match(r.error.details, /^message is not valid JSON: /);
      assert.doesNotMatch(r.error.details, /secret|ecret-/, r.error.details);
    }
    const ctl = parseClientMessage('\u001b[2J');
    assert.ok(!ctl.ok);
    assert.equal(ctl.error.details, 'message is not valid JSON: Unexpected token "\\u001b"');
  });
});
