// The sealing of a session record's client content: only the resume key opens it, and a record whose
// clear fields (tenant, ledger session) were changed in Redis does not open.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { openRecord, recordKeys, sealRecord, type SealedRecord } from '../../src/cluster/index.js';

const KEY = 'resume-key-0123456789abcdefXYZ';
const head = {
  owner: 'a',
  ownerUrl: 'ws://a',
  state: 'live' as const,
  tenant: 'acme',
  endpoint: 'transcribe' as const,
  sessionKey: 'sk-1',
  updatedAt: 1,
};
const content = {
  subject: 'user-1',
  config: { primaryLanguage: 'en' },
  init: 'GkXfow==',
  missed: ['{"type":"transcript"}'],
};

const sealed = (key: string): SealedRecord => sealRecord(recordKeys(key), { ...head, ...content });

describe('sealed record content', () => {
  it('opens with its resume key; not with another, nor after its tenant or ledger session changed', () => {
    const r = sealed(KEY);
    assert.ok(
      !JSON.stringify(r).includes('user-1') && !JSON.stringify(r).includes('primaryLanguage'),
      'nothing of the content in clear',
    );
    assert.deepEqual(openRecord(recordKeys(KEY), r), { ...head, ...content });
    assert.throws(() => openRecord(recordKeys(`${KEY}-other`), r));
    assert.throws(() => openRecord(recordKeys(KEY), { ...r, tenant: 'globex' }));
    assert.throws(() => openRecord(recordKeys(KEY), { ...r, sessionKey: 'sk-2' }));
  });

  it('the sealing key is not the record key hash, and each seal is fresh', () => {
    const k = recordKeys(KEY);
    assert.notEqual(k.sealing.toString('hex'), k.hash);
    assert.notEqual(sealed(KEY).sealed, sealed(KEY).sealed, 'a random IV per write');
  });
});
