// The audio a session keeps for a replay costs its bytes and little more: with 20 ms Opus packets a
// session keeps about 100 packets (two seconds no final covers yet), and an object per packet,
// promoted by V8 and freed only by a major GC, had cost more heap than the packets' own bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createReplayBuffer, type ReplayBuffer } from '../../src/audio/replay.js';
import { KeptGroup } from '../../src/audio/replay/index.js';
import { createParser } from '../../src/audio/source.js';
import { evenChunks, fixture } from '../support/fixtures.js';
import { memoryAfterGc } from '../support/gc.js';

/** ffmpeg's WebM (20 ms Opus packets) in ~1 KB pieces. */
const pieces = evenChunks(fixture('dictation.webm'), 1000).slice(0, 12);
/** A piece in an ArrayBuffer of its own, as the inbox delivers it (not Node's pool, where pieces copied
 *  one after another would lie end to end and make one run). */
const ownCopy = (b: Buffer) => Buffer.from(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));

describe('replay memory', () => {
  it('300 sessions keeping 20 ms packets hold little heap per packet', async () => {
    const kept: ReplayBuffer[] = [];
    let units = 0;
    const before = (await memoryAfterGc()).heapUsed;
    for (let s = 0; s < 300; s++) {
      const parser = createParser('webm');
      const replay = createReplayBuffer('webm', { maxBytes: 1 << 20 });
      for (const piece of pieces)
        for (const u of parser.push(ownCopy(piece))) {
          replay.add(u);
          if (!u.header) units++;
        }
      kept.push(replay);
    }
    const perUnit = ((await memoryAfterGc()).heapUsed - before) / units;
    assert.equal(kept.length, 300);
    // A Buffer view per packet measured 146 bytes a packet here; runs of contiguous bytes, about 54.
    assert.ok(perUnit < 90, `${perUnit.toFixed(0)} bytes of heap per kept packet (${units} packets)`);
  });

  it('a group reads back each unit it kept, whether the units lie end to end in memory or not', () => {
    const one = Buffer.from('abcdef'),
      two = Buffer.from('WXYZ');
    const kept = [one.subarray(0, 3), one.subarray(3, 5), Buffer.alloc(0), two, one.subarray(5, 6)];
    const g = new KeptGroup(null, 0);
    for (const b of kept) g.push(b);
    assert.deepEqual(
      g.units.map((b) => b.toString()),
      ['abc', 'de', '', 'WXYZ', 'f'],
    );
    assert.equal(g.bytes, 10);
  });
});
