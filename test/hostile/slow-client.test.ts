// Hostile review: a client that stops reading. uWS drops messages past a socket's backpressure
// limit; the gateway must notice, close the client with a clear code and record what happened,
// instead of losing final transcripts silently and recording a normal end.
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { ledgerSessions } from '../support/usage-api.js';

const ogg = fixture('dictation.ogg');
const API = 'test-usage-token';

describe('a client that stops reading', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '20', USAGE_API_TOKEN: API });
    // 26 final transcripts of 600 KB (interims are shed once it falls behind): far more than the kernel's socket buffers and the gateway's backlog bound.
    stack.emulator.faults.padTranscriptBytes = 600_000;
  });
  afterAll(() => stack.close());

  it('is closed with 4429 and recorded as client_slow, and its upstream session still ends with final usage', async () => {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/ogg' } });
    await c.next('CONFIG_ACCEPTED');
    const socket = (c.ws as unknown as { _socket: Socket })._socket;
    socket.pause(); // stops reading; keeps sending
    for (let off = 0; off < ogg.length; off += 8000) c.send(ogg.subarray(off, off + 8000));
    c.sendJson({ type: 'end' });

    let row;
    for (let i = 0; i < 300 && !row?.end; i++) {
      row = (await ledgerSessions(stack, API)).at(-1);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(row?.end, 'the session is closed in the ledger');
    assert.equal(row.outcome, 'client_slow', 'the record says the client could not keep up, not that it ended normally');
    assert.equal(row.estimated, false, 'the upstream session was still ended, so its usage is final');

    socket.resume();
    const { code } = await c.closed;
    assert.ok(code === 4429 || code === 1006, `the client is closed as too slow (got ${code})`);
    assert.ok(!c.types().includes('ended'), 'no normal end was pretended');
  });
});
