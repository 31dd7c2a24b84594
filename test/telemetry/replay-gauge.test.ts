// The replay gauge an operator (and the load benchmark) reads to see how much of the memory per
// session is audio kept for a replay: while a session streams it holds what no final covers yet, at
// most what the client sent; once the session ended it is back at 0.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks } from '../support/fixtures.js';
import { configured, englishConfiguration, startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const pieces = chromeChunks('webm-opus');

async function heldBytes(stack: Stack): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}/metrics`)).text();
  const m = /^speech_gateway_replay_buffered_bytes (\d+)$/m.exec(text);
  assert.ok(m, 'the gauge is scraped');
  return Number(m[1]);
}

describe('speech_gateway_replay_buffered_bytes', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack?.close());

  it('shows the audio kept while a session streams, within what was sent, and 0 after it ended', async () => {
    assert.equal(await heldBytes(stack), 0);
    const c = await stack.connect('transcribe');
    await configured(c, englishConfiguration('transcribe', 'audio/webm;codecs=opus'));
    let sent = 0;
    for (const p of pieces.slice(0, 12)) {
      c.send(p);
      sent += p.length;
      await delay(50);
    }
    await delay(300);
    const held = await heldBytes(stack);
    assert.ok(held > 0 && held <= sent, `held ${held} of ${sent} bytes sent`);
    c.sendJson({ type: 'end' });
    await c.next('ended', 15_000);
    await c.closed;
    assert.equal(await heldBytes(stack), 0);
  });
});
