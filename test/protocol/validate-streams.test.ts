import { test } from 'vitest';
import assert from 'node:assert/strict';
import { validateConfig } from '../../src/protocol/index.js';
import { accepted, denied } from '../support/config-validation.js';

const base = { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' } };
const withTranscription = (t: Record<string, unknown>) => ({ ...base, transcription: { primaryLanguage: 'en', ...t } });

test('a full valid configuration is accepted with unknown fields kept', () => {
  const full = {
    transcription: {
      primaryLanguage: 'en',
      diarize: true,
      wordLevel: { enabled: true },
      isMultichannel: true,
      participants: [
        { channel: 0, role: 'doctor' },
        { channel: 1, role: 'patient' },
      ],
    },
    mode: { type: 'facts', outputLocale: 'de', factGenerationInterval: 'fast_init' },
    retentionPolicy: 'none',
    formatting: { dates: 'iso' },
    audioFormat: 'audio/webm;codecs=opus',
    audioEvents: { enabled: true },
    replacements: [{ find: 'b p', replace: 'blood pressure' }],
    keyterms: { terms: [{ term: 'metoprolol' }] },
    somethingNew: true,
  };
  assert.deepEqual(accepted('streams', full), full);
  assert.deepEqual(accepted('streams', base), base);
  accepted('streams', { ...base, mode: { type: 'transcription', factGenerationInterval: '' } });
});

test('legacy isDiarization is normalised to diarize', () => {
  assert.deepEqual(accepted('streams', withTranscription({ isDiarization: true })), {
    ...base,
    transcription: { primaryLanguage: 'en', diarize: true },
  });
  assert.deepEqual(accepted('streams', withTranscription({ isDiarization: false, diarize: false })), {
    ...base,
    transcription: { primaryLanguage: 'en', diarize: false },
  });
  assert.equal(
    denied('streams', withTranscription({ isDiarization: true, diarize: false })),
    'configuration.transcription.isDiarization: conflicts with transcription.diarize (true vs false); send only diarize',
  );
  assert.equal(
    denied('streams', withTranscription({ isDiarization: 'yes' })),
    'configuration.transcription.isDiarization: must be a boolean (got "yes")',
  );
});

test('transcription and its primaryLanguage are required', () => {
  assert.equal(denied('streams', { mode: { type: 'transcription' } }), 'configuration.transcription: is required');
  assert.equal(
    denied('streams', { ...base, transcription: {} }),
    'configuration.transcription.primaryLanguage: is required',
  );
  assert.equal(
    denied('streams', { ...base, transcription: { primaryLanguage: '' } }),
    'configuration.transcription.primaryLanguage: must not be empty',
  );
  // the /transcribe shape is not a /streams config
  assert.equal(denied('streams', { primaryLanguage: 'en' }), 'configuration.transcription: is required');
});

test('transcription flags are booleans', () => {
  assert.equal(
    denied('streams', withTranscription({ diarize: 1 })),
    'configuration.transcription.diarize: must be a boolean (got 1)',
  );
  assert.equal(
    denied('streams', withTranscription({ isMultichannel: 'false' })),
    'configuration.transcription.isMultichannel: must be a boolean (got "false")',
  );
  assert.equal(
    denied('streams', withTranscription({ wordLevel: { enabled: 'on' } })),
    'configuration.transcription.wordLevel.enabled: must be a boolean (got "on")',
  );
  assert.equal(
    denied('streams', withTranscription({ wordLevel: true })),
    'configuration.transcription.wordLevel: must be an object (got true)',
  );
});

test('participants: channel an integer >= 0, role a non-empty string', () => {
  const p = (participants: unknown) => withTranscription({ participants });
  assert.equal(
    denied(
      'streams',
      p([
        { channel: 0, role: 'doctor' },
        { channel: -1, role: 'patient' },
      ]),
    ),
    'configuration.transcription.participants[1].channel: must be >= 0 (got -1)',
  );
  assert.equal(
    denied('streams', p([{ channel: 1.5, role: 'doctor' }])),
    'configuration.transcription.participants[0].channel: must be an integer (got 1.5)',
  );
  assert.equal(
    denied('streams', p([{ channel: '0', role: 'doctor' }])),
    'configuration.transcription.participants[0].channel: must be a number (got "0")',
  );
  assert.equal(denied('streams', p([{ channel: 0 }])), 'configuration.transcription.participants[0].role: is required');
  assert.equal(
    denied('streams', p([{ channel: 0, role: '' }])),
    'configuration.transcription.participants[0].role: must not be empty',
  );
  accepted('streams', p([{ channel: 3, role: 'multiple' }]));
});

test('mode: type required, outputLocale required for facts, factGenerationInterval enum', () => {
  assert.equal(denied('streams', { transcription: { primaryLanguage: 'en' } }), 'configuration.mode: is required');
  assert.equal(denied('streams', { ...base, mode: {} }), 'configuration.mode.type: is required');
  assert.equal(
    denied('streams', { ...base, mode: { type: 'summary' } }),
    'configuration.mode.type: must be one of "facts", "transcription" (got "summary")',
  );
  assert.equal(
    denied('streams', { ...base, mode: { type: 'facts' } }),
    'configuration.mode.outputLocale: is required when mode.type is "facts"',
  );
  assert.equal(
    denied('streams', { ...base, mode: { type: 'facts', outputLocale: 7 } }),
    'configuration.mode.outputLocale: must be a string (got 7)',
  );
  assert.equal(
    denied('streams', { ...base, mode: { type: 'facts', outputLocale: 'en', factGenerationInterval: 'slow' } }),
    'configuration.mode.factGenerationInterval: must be one of "", "fixed", "fast_init" (got "slow")',
  );
  accepted('streams', { ...base, mode: { type: 'facts', outputLocale: 'en', factGenerationInterval: 'fixed' } });
});

test('retentionPolicy is none or retain', () => {
  assert.equal(
    denied('streams', { ...base, retentionPolicy: 'forever' }),
    'configuration.retentionPolicy: must be one of "none", "retain" (got "forever")',
  );
  accepted('streams', { ...base, retentionPolicy: 'retain' });
});

test('formatting and audioEvents as on /transcribe', () => {
  assert.equal(
    denied('streams', { ...base, formatting: { times: '12h' } }),
    'configuration.formatting.times: must be one of "locale", "h24", "h12" (got "12h")',
  );
  assert.equal(
    denied('streams', { ...base, audioEvents: { enabled: 'yes' } }),
    'configuration.audioEvents.enabled: must be a boolean (got "yes")',
  );
});

test('replacements: each side at most 50 characters and 5 words, at most 1000 items', () => {
  assert.equal(
    denied('streams', { ...base, replacements: [{ find: 'one two three four five six', replace: 'x' }] }),
    'configuration.replacements[0].find: at most 5 words (got 6)',
  );
  assert.equal(
    denied('streams', { ...base, replacements: [{ find: 'bp', replace: 'y'.repeat(51) }] }),
    'configuration.replacements[0].replace: at most 50 characters (got 51)',
  );
  const items = Array.from({ length: 1001 }, (_, i) => ({ find: `f${i}`, replace: 'r' }));
  assert.equal(
    denied('streams', { ...base, replacements: items }),
    'configuration.replacements: at most 1000 items (got 1001)',
  );
  accepted('streams', {
    ...base,
    replacements: [{ find: '  one two   three four five ', replace: '' }, ...items.slice(0, 999)],
  });
});

test('keyterms: each term at most 50 characters and 5 words, at most 1000', () => {
  assert.equal(
    denied('streams', { ...base, keyterms: { terms: [{ term: 'a b c d e f' }] } }),
    'configuration.keyterms.terms[0].term: at most 5 words (got 6)',
  );
  assert.equal(
    denied('streams', { ...base, keyterms: { terms: [{ term: 'ok' }, { term: 'z'.repeat(51) }] } }),
    'configuration.keyterms.terms[1].term: at most 50 characters (got 51)',
  );
  const terms = Array.from({ length: 1001 }, (_, i) => ({ term: `t${i}` }));
  assert.equal(
    denied('streams', { ...base, keyterms: { terms } }),
    'configuration.keyterms.terms: at most 1000 items (got 1001)',
  );
  accepted('streams', { ...base, keyterms: { terms: terms.slice(0, 1000) } });
});

test('audioFormat: unsupported is rejected, invalid config is denied first', () => {
  assert.deepEqual(validateConfig('streams', { ...base, audioFormat: 'audio/mp4;codecs=opus' }), {
    ok: false,
    status: 'rejected',
    reason: 'configuration.audioFormat: unsupported audio format "audio/mp4;codecs=opus"',
  });
  assert.equal(
    denied('streams', { ...base, mode: { type: 'facts' }, audioFormat: 'audio/wav' }),
    'configuration.mode.outputLocale: is required when mode.type is "facts"',
  );
});
