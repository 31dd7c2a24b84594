// The audio a session keeps for a replay costs its bytes and little more: with 20 ms Opus packets a
// session keeps about 100 packets (two seconds no final covers yet), and an object per packet,
// promoted by V8 and freed only by a major GC, had cost more heap than the packets' own bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createReplayBuffer, type ReplayBuffer } from '../../src/audio/replay.js';
import { KeptGroup } from '../../src/audio/replay/index.js';
import { createParser } from '../../src/audio/source.js';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';
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

  it('a session streaming for minutes pins only the audio no final covers, and replays it whole', async () => {
    // Chromium's recording looped for 3 minutes in ~4.5 KB pieces of their own, a final a second
    // behind until 170 s, then none for a while.
    const parser = createParser('webm');
    const replay = createReplayBuffer('webm', { maxBytes: 1 << 20 });
    // The memory the units are views of: the pieces, or a copy where a unit straddled two.
    const memory: Array<WeakRef<ArrayBufferLike>> = [];
    const seen = new WeakSet<ArrayBufferLike>();
    let lastEnd = 0,
      cut = 0;
    for (const original of evenChunks(looped(chromeChunks('webm-opus'), 18), PIECE)) {
      for (const u of parser.push(ownCopy(original))) {
        if (!seen.has(u.bytes.buffer)) memory.push(new WeakRef(u.bytes.buffer));
        seen.add(u.bytes.buffer);
        replay.add(u);
        if (u.end !== undefined) lastEnd = Math.max(lastEnd, u.end);
      }
      if (lastEnd < 170) replay.release((cut = lastEnd - 1));
    }
    assert.ok(lastEnd > 170, `the stream lasts ${lastEnd} s`);
    const r = replay.replay();
    replay.release(lastEnd); // then a final covering everything: the groups before the newest go
    await memoryAfterGc();
    const pinned = memory.reduce((n, m) => n + (m.deref()?.byteLength ?? 0), 0);
    // Kept: the newest Cluster (~5 KB), which lies in up to three pieces' memory, and the parser's rest.
    assert.ok(
      pinned <= 4 * PIECE,
      `${pinned} bytes of the units' memory still held; the replay holds ${replay.bufferedBytes}`,
    );
    // What the replay sent before that final parses back as the stream from the cut on, from 0.
    const check = createParser('webm');
    const media = r.frames.flatMap((f) => check.push(f)).filter((u) => u.end !== undefined);
    assert.ok(media.length > 0 && Math.abs(media[0].start!) < 0.07, `replay starts at ${media[0]?.start}`);
    const end = media.at(-1)!.end! + r.offset;
    assert.ok(Math.abs(end - lastEnd) < 0.07, `replay ends at ${end}, the stream at ${lastEnd}`);
    assert.ok(r.offset > cut - 0.1 && r.offset <= cut, `replay from ${r.offset}, the cut at ${cut}`);
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
    g.clear().reuse(null, 7);
    g.push(two.subarray(1, 3));
    assert.deepEqual(
      g.units.map((b) => b.toString()),
      ['XY'],
      'used again: only what it kept since',
    );
    assert.equal(g.bytes, 2);
  });
});

/** The recording played `times` times as one stream: the headers once, then its Clusters again and
 *  again, each with a Timecode (ms) moved on by 10 s a time (written on 4 bytes: Chromium's Clusters
 *  have an unknown size, so their length may change). */
function looped(pieces: Buffer[], times: number): Buffer {
  const whole = Buffer.concat(pieces);
  const starts: number[] = [];
  for (let at = whole.indexOf(CLUSTER_ID); at >= 0; at = whole.indexOf(CLUSTER_ID, at + 4)) starts.push(at);
  const out: Buffer[] = [whole.subarray(0, starts[0])];
  for (let k = 0; k < times; k++)
    for (const [c, from] of starts.entries()) {
      const tc = from + 12; // id (4 bytes), unknown size (8), then the Timecode (0xE7, a 1-byte size, the value)
      const size = whole[tc + 1] & 0x7f;
      const timecode = Buffer.from([0xe7, 0x84, 0, 0, 0, 0]);
      timecode.writeUInt32BE(whole.readUIntBE(tc + 2, size) + k * 10_000, 2);
      out.push(whole.subarray(from, tc), timecode, whole.subarray(tc + 2 + size, starts[c + 1] ?? whole.length));
    }
  return Buffer.concat(out);
}
const CLUSTER_ID = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);
const PIECE = 4500;
