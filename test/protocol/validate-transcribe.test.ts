import { test } from 'vitest';
import assert from 'node:assert/strict';
import { validateConfig } from '../../src/protocol/index.js';
import { accepted, denied } from '../support/config-validation.js';

const base = { primaryLanguage: 'en' };

const commandsWith = (...cmds: unknown[]) => ({ ...base, commands: cmds });

test('a full valid configuration is accepted unchanged, unknown fields included', () => {
  const full = {
    primaryLanguage: 'en-US',
    interimResults: true,
    spokenPunctuation: false,
    automaticPunctuation: true,
    commands: [
      { id: 'next', phrases: ['next section', 'go to next'] },
      {
        id: 'insert',
        phrases: ['insert {template}', 'add {template} template'],
        variables: [{ key: 'template', type: 'enum', enum: ['soap', 'discharge'] }],
      },
      {
        id: 'note',
        phrases: ['note {text}', 'take {a} then {b}'],
        variables: [
          { key: 'text', type: 'wildcard' },
          { key: 'a', type: 'wildcard' },
          { key: 'b', type: 'wildcard' },
          { key: 'unused', type: 'wildcard' },
        ],
      },
    ],
    formatting: {
      dates: 'iso',
      times: 'h24',
      numbers: 'numerals',
      measurements: 'as_dictated',
      numericRanges: 'numerals',
      ordinals: 'as_dictated',
    },
    audioFormat: 'audio/ogg;codecs=opus',
    audioEvents: { enabled: true },
    replacements: [{ find: 'a long find phrase with many more than five words in it', replace: 'x' }],
    keyterms: { terms: [{ term: 'metoprolol succinate extended release tablets oral' }] },
    futureField: { anything: [1] },
  };
  assert.deepEqual(accepted('transcribe', full), full);
  assert.deepEqual(accepted('transcribe', base), base);
});

test('configuration itself must be an object', () => {
  assert.equal(denied('transcribe', undefined), 'configuration: is required');
  assert.equal(denied('transcribe', null), 'configuration: must be an object (got null)');
  assert.equal(denied('transcribe', []), 'configuration: must be an object (got array)');
  assert.equal(denied('transcribe', 'en'), 'configuration: must be an object (got "en")');
});

test('primaryLanguage is a required non-empty string', () => {
  assert.equal(denied('transcribe', {}), 'configuration.primaryLanguage: is required');
  assert.equal(denied('transcribe', { primaryLanguage: 5 }), 'configuration.primaryLanguage: must be a string (got 5)');
  assert.equal(denied('transcribe', { primaryLanguage: ' ' }), 'configuration.primaryLanguage: must not be empty');
});

test('boolean flags reject other types', () => {
  for (const f of ['interimResults', 'spokenPunctuation', 'automaticPunctuation']) {
    assert.equal(denied('transcribe', { ...base, [f]: 'true' }), `configuration.${f}: must be a boolean (got "true")`);
  }
});

test('commands: shape', () => {
  assert.equal(
    denied('transcribe', { ...base, commands: {} }),
    'configuration.commands: must be an array (got object)',
  );
  assert.equal(denied('transcribe', commandsWith({ phrases: ['x'] })), 'configuration.commands[0].id: is required');
  assert.equal(
    denied(
      'transcribe',
      commandsWith({ id: 'a', phrases: ['x'] }, { id: 'b', phrases: ['y'] }, { id: 'c', phrases: [] }),
    ),
    'configuration.commands[2].phrases: at least one phrase is required',
  );
  assert.equal(denied('transcribe', commandsWith({ id: 'a' })), 'configuration.commands[0].phrases: is required');
  assert.equal(
    denied('transcribe', commandsWith({ id: 'a', phrases: ['ok', ''] })),
    'configuration.commands[0].phrases[1]: must not be empty',
  );
  assert.equal(
    denied('transcribe', commandsWith({ id: 'a', phrases: ['ok', 3] })),
    'configuration.commands[0].phrases[1]: must be a string (got 3)',
  );
});

test('commands: ids are unique', () => {
  assert.equal(
    denied(
      'transcribe',
      commandsWith({ id: 'a', phrases: ['x'] }, { id: 'b', phrases: ['y'] }, { id: 'a', phrases: ['z'] }),
    ),
    'configuration.commands[2].id: duplicate command id "a" (also commands[0].id)',
  );
});

test('commands: variables', () => {
  const v = (variables: unknown, phrases = ['say {x}']) => commandsWith({ id: 'a', phrases, variables });
  assert.equal(
    denied('transcribe', v([{ key: 'x', type: 'free' }])),
    'configuration.commands[0].variables[0].type: must be one of "enum", "wildcard" (got "free")',
  );
  assert.equal(
    denied('transcribe', v([{ type: 'wildcard' }])),
    'configuration.commands[0].variables[0].key: is required',
  );
  assert.equal(
    denied('transcribe', v([{ key: 'x', type: 'enum' }])),
    'configuration.commands[0].variables[0].enum: is required when type is "enum"',
  );
  assert.equal(
    denied('transcribe', v([{ key: 'x', type: 'enum', enum: [] }])),
    'configuration.commands[0].variables[0].enum: an enum variable needs at least one value',
  );
  assert.equal(
    denied(
      'transcribe',
      v([
        { key: 'x', type: 'wildcard' },
        { key: 'x', type: 'enum', enum: ['a'] },
      ]),
    ),
    'configuration.commands[0].variables[1].key: duplicate variable key "x"',
  );
  // enum is ignored for wildcards, an unused declared variable is fine
  accepted(
    'transcribe',
    v([
      { key: 'x', type: 'wildcard', enum: [] },
      { key: 'y', type: 'enum', enum: ['a'] },
    ]),
  );
});

test('commands: every {name} in a phrase is a declared variable', () => {
  assert.equal(
    denied('transcribe', commandsWith({ id: 'a', phrases: ['open {chart}'] })),
    'configuration.commands[0].phrases[0]: "{chart}" is not a declared variable key',
  );
  assert.equal(
    denied(
      'transcribe',
      commandsWith({
        id: 'a',
        phrases: ['open {chart}', 'go {where}'],
        variables: [{ key: 'chart', type: 'enum', enum: ['x'] }],
      }),
    ),
    'configuration.commands[0].phrases[1]: "{where}" is not a declared variable key',
  );
  assert.equal(
    denied('transcribe', commandsWith({ id: 'a', phrases: ['open {chart'] })),
    'configuration.commands[0].phrases[0]: unclosed "{" at position 5',
  );
  assert.equal(
    denied('transcribe', commandsWith({ id: 'a', phrases: ['open chart}'] })),
    'configuration.commands[0].phrases[0]: unmatched "}" at position 10',
  );
});

test('commands: a wildcard needs a literal trigger word before it', () => {
  const w = (phrase: string, extra: unknown[] = []) =>
    commandsWith({
      id: 'a',
      phrases: [phrase],
      variables: [
        { key: 'x', type: 'wildcard' },
        { key: 'y', type: 'wildcard' },
        { key: 'd', type: 'enum', enum: ['m'] },
        ...extra,
      ],
    });
  assert.equal(
    denied('transcribe', w('{x} note')),
    'configuration.commands[0].phrases[0]: wildcard "{x}" must be preceded by a literal trigger word',
  );
  assert.equal(
    denied('transcribe', w('  {x}')),
    'configuration.commands[0].phrases[0]: wildcard "{x}" must be preceded by a literal trigger word',
  );
  // an enum value is not a literal trigger word
  assert.equal(
    denied('transcribe', w('{d} {x}')),
    'configuration.commands[0].phrases[0]: wildcard "{x}" must be preceded by a literal trigger word',
  );
  accepted('transcribe', w('note {x}'));
  accepted('transcribe', w('{d} note {x}'));
  accepted('transcribe', w('{d} only'));
});

test('commands: two wildcards are separated by a non-empty literal', () => {
  const w = (phrase: string) =>
    commandsWith({
      id: 'a',
      phrases: [phrase],
      variables: [
        { key: 'a', type: 'wildcard' },
        { key: 'b', type: 'wildcard' },
        { key: 'd', type: 'enum', enum: ['m'] },
      ],
    });
  assert.equal(
    denied('transcribe', w('take {a} {b}')),
    'configuration.commands[0].phrases[0]: wildcards "{a}" and "{b}" must be separated by a non-empty literal',
  );
  assert.equal(
    denied('transcribe', w('take {a}{b}')),
    'configuration.commands[0].phrases[0]: wildcards "{a}" and "{b}" must be separated by a non-empty literal',
  );
  assert.equal(
    denied('transcribe', w('take {a} {d} {b}')),
    'configuration.commands[0].phrases[0]: wildcards "{a}" and "{b}" must be separated by a non-empty literal',
  );
  accepted('transcribe', w('take {a} then {b}'));
  accepted('transcribe', w('take {a} then {d} {b}'));
});

test('formatting enums', () => {
  const cases: Record<string, string> = {
    dates: '"locale:long", "locale:medium", "locale:short", "iso", "as_dictated"',
    times: '"locale", "h24", "h12"',
    numbers: '"numerals_above_nine", "numerals", "as_dictated"',
    measurements: '"abbreviated", "as_dictated"',
    numericRanges: '"numerals", "as_dictated"',
    ordinals: '"numerals_above_nine", "numerals", "as_dictated"',
  };
  for (const [field, options] of Object.entries(cases)) {
    assert.equal(
      denied('transcribe', { ...base, formatting: { [field]: 'roman' } }),
      `configuration.formatting.${field}: must be one of ${options} (got "roman")`,
    );
  }
  assert.equal(
    denied('transcribe', { ...base, formatting: 'iso' }),
    'configuration.formatting: must be an object (got "iso")',
  );
});

test('audioEvents.enabled is a required boolean', () => {
  assert.equal(denied('transcribe', { ...base, audioEvents: {} }), 'configuration.audioEvents.enabled: is required');
  assert.equal(
    denied('transcribe', { ...base, audioEvents: { enabled: 1 } }),
    'configuration.audioEvents.enabled: must be a boolean (got 1)',
  );
  accepted('transcribe', { ...base, audioEvents: { enabled: false } });
});

test('replacements: items of find and replace strings, at most 1000', () => {
  assert.equal(
    denied('transcribe', { ...base, replacements: [{ find: 'a', replace: 'b' }, { find: 'c' }] }),
    'configuration.replacements[1].replace: is required',
  );
  assert.equal(
    denied('transcribe', { ...base, replacements: [{ find: 1, replace: 'b' }] }),
    'configuration.replacements[0].find: must be a string (got 1)',
  );
  const items = Array.from({ length: 1001 }, (_, i) => ({ find: `f${i}`, replace: 'r' }));
  assert.equal(
    denied('transcribe', { ...base, replacements: items }),
    'configuration.replacements: at most 1000 items (got 1001)',
  );
  accepted('transcribe', { ...base, replacements: items.slice(0, 1000) });
});

test('keyterms: terms of at most 50 characters, at most 1000', () => {
  const terms = (n: number, long?: number) =>
    Array.from({ length: n }, (_, i) => ({ term: i === long ? 'x'.repeat(61) : `t${i}` }));
  assert.equal(
    denied('transcribe', { ...base, keyterms: { terms: terms(5, 3) } }),
    'configuration.keyterms.terms[3].term: at most 50 characters (got 61)',
  );
  assert.equal(
    denied('transcribe', { ...base, keyterms: { terms: terms(1001) } }),
    'configuration.keyterms.terms: at most 1000 items (got 1001)',
  );
  assert.equal(denied('transcribe', { ...base, keyterms: {} }), 'configuration.keyterms.terms: is required');
  assert.equal(
    denied('transcribe', { ...base, keyterms: { terms: [{ term: null }] } }),
    'configuration.keyterms.terms[0].term: must be a string (got null)',
  );
  accepted('transcribe', { ...base, keyterms: { terms: [{ term: 'x'.repeat(50) }, ...terms(999)] } });
});

test('an unsupported audioFormat is rejected, not denied', () => {
  const r = validateConfig('transcribe', { ...base, audioFormat: 'audio/wav' });
  assert.deepEqual(r, {
    ok: false,
    status: 'rejected',
    reason: 'configuration.audioFormat: unsupported audio format "audio/wav"',
  });
  assert.equal(
    denied('transcribe', { ...base, audioFormat: 16000 }),
    'configuration.audioFormat: must be a string (got 16000)',
  );
});

test('denied wins over rejected when a config is both invalid and has an unsupported audioFormat', () => {
  assert.equal(denied('transcribe', { audioFormat: 'audio/wav' }), 'configuration.primaryLanguage: is required');
});

test('the caller decides which formats it supports (the gateway transcodes some)', () => {
  const pcm = { ...base, audioFormat: 'audio/pcm;rate=16000;channels=1' };
  assert.equal(validateConfig('transcribe', pcm).ok, false);
  const r = validateConfig('transcribe', pcm, { isSupportedAudioFormat: (m) => m.startsWith('audio/pcm') });
  assert.equal(r.ok, true);
  const none = validateConfig(
    'transcribe',
    { ...base, audioFormat: 'audio/ogg' },
    { isSupportedAudioFormat: () => false },
  );
  assert.equal(none.ok === false && none.status, 'rejected');
});
