// Hostile input costs the gateway linear time: a parser that searches for a boundary does not
// search the same bytes again each time a few more arrive (that stalled every session on the
// process: 8 MiB of junk after a FLAC header took minutes of CPU, one event-loop turn at a time).
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { fixture, open } from '../audio/helpers.js';

/** dictation.flac up to the end of its metadata blocks. */
function flacHeaders(): Buffer {
  const f = fixture('dictation.flac');
  let off = 4;
  for (let last = 0; !last; off += 4 + f.readUIntBE(off + 1, 3)) last = f[off] & 0x80;
  return f.subarray(0, off);
}

describe('FLAC without frames', () => {
  it('8 MiB of junk in 512-byte pieces: AUDIO_MALFORMED once no frame can be that long, in well under a second', () => {
    const run = open('audio/flac', { pace: 1000, maxBufferedBytes: 16 * 1024 * 1024 });
    run.pipeline.push(flacHeaders());
    const junk = Buffer.alloc(512, 0x11);
    const started = performance.now();
    let sent = 0;
    for (; sent < 8 * 1024 * 1024 && run.errors.length === 0; sent += junk.length) run.pipeline.push(junk);
    const ms = performance.now() - started;
    assert.equal(run.errors[0]?.id, 'AUDIO_MALFORMED');
    assert.match(run.errors[0].details, /^no FLAC frame header in the \d+ bytes from byte \d+$/);
    assert.ok(sent < 3 * 1024 * 1024, `refused after ${sent} bytes`);
    assert.ok(ms < 1000, `${ms.toFixed(0)} ms`);
    run.pipeline.close();
  });
});
