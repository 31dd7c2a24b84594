// A malformed container is the client's error, said precisely: AUDIO_MALFORMED with what
// was wrong and where, never INTERNAL (a truncated MP4 box used to make the parser read past it).
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';

/** dictation.m4a with its 92-byte tkhd cut to 16 bytes, the rest of it turned into a 'free' box:
 * every box still fits its parent, but tkhd is too short for the fields it must hold. */
function truncatedTkhd(): Buffer {
  const m4a = Buffer.from(fixture('dictation.m4a'));
  const at = m4a.indexOf('tkhd', 0, 'latin1') - 4;
  assert.equal(m4a.readUInt32BE(at), 92);
  m4a.writeUInt32BE(16, at);
  m4a.writeUInt32BE(92 - 16, at + 16);
  m4a.write('free', at + 20, 'latin1');
  return m4a;
}

describe('malformed containers over a real socket', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '50' });
  });
  afterAll(() => stack.close());

  it('a truncated MP4 box: AUDIO_MALFORMED naming the box, close 4422, nothing upstream', async () => {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/mp4' } });
    await c.next('CONFIG_ACCEPTED');
    c.send(truncatedTkhd());
    const e = await c.next('error');
    assert.equal(e.error.id, 'AUDIO_MALFORMED', JSON.stringify(e));
    assert.match(e.error.details, /MP4 box "tkhd" has 8 bytes; its fields need 16/);
    assert.equal((await c.closed).code, 4422);
    assert.equal(stack.emulator.sessions.at(-1)!.audio.length, 0);
  });
});
