// Hostile review: a client that stops reading. uWS drops messages past a socket's backpressure
// limit; the gateway must notice, close the client with a clear code and record what happened,
// instead of losing final transcripts silently and recording a normal end.
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { ledgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const ogg = fixture('dictation.ogg');
const API = 'test-usage-token';

describe('a client that stops reading', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '20', USAGE_API_TOKEN: API });
    // ~130 transcripts of 300 KB for the client that asks for interims: the interims fill the kernel's socket
    // buffers, then the finals (never shed) outgrow the gateway's backlog bound.
    stack.emulator.faults.padTranscriptBytes = 300_000;
  });
  afterAll(() => stack.close());

  it('is closed with 4429 and recorded as client_slow, its upstream session still ends with final usage, and clients alongside lose nothing', async () => {
    const normal = await Promise.all(Array.from({ length: 3 }, () => dictation(false)));
    const c = await dictation(true);
    const socket = (c.ws as unknown as { _socket: Socket })._socket;
    socket.pause(); // stops reading; keeps sending
    for (const client of [...normal, c]) {
      for (let off = 0; off < ogg.length; off += 8000) client.send(ogg.subarray(off, off + 8000));
      client.sendJson({ type: 'end' });
    }

    for (const client of normal) {
      await client.next('ended', 30_000);
      assert.equal((await client.closed).code, 1000);
      const f = finals(client.messages);
      for (let k = 1; k < f.length; k++) assert.equal(f[k].start, f[k - 1].end, 'every final, once, in order');
      assert.ok(f.at(-1)!.end > 25, 'the whole file');
    }

    let rows = await ledgerSessions(stack, API);
    for (let i = 0; i < 300 && (rows.length < 4 || rows.some((r) => !r.end)); i++)
      rows = await delay(100).then(() => ledgerSessions(stack, API));
    const slow = rows.filter((r) => r.outcome === 'client_slow');
    assert.equal(slow.length, 1, `one client could not keep up: ${JSON.stringify(rows.map((r) => r.outcome))}`);
    assert.equal(slow[0].estimated, false, 'its upstream session was still ended, so its usage is final');
    assert.deepEqual(
      rows.filter((r) => r !== slow[0]).map((r) => r.outcome),
      ['ended', 'ended', 'ended'],
    );

    socket.resume();
    const { code } = await c.closed;
    assert.ok(code === 4429 || code === 1006, `the client is closed as too slow (got ${code})`);
    assert.ok(!c.types().includes('ended'), 'no normal end was pretended');
  });

  async function dictation(interimResults: boolean) {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', interimResults, audioFormat: 'audio/ogg' } });
    await c.next('CONFIG_ACCEPTED');
    return c;
  }
});
