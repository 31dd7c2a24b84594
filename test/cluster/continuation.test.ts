// A handover's continuation: the successor's parser, primed with the stream's headers and the
// continuation the owner's parser gave (the open Cluster's head, a partial element), parses the rest
// of the client's stream exactly as the owner's would have, from any byte the client's messages end
// at; and its replay to the new upstream session starts the first audio at 0 whichever way the
// upstream times it (timestamps or counted audio).
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { WebmParser } from '../../src/audio/containers/webm.js';
import { createReplayBuffer } from '../../src/audio/replay.js';
import { chromeChunks } from '../support/fixtures.js';

const stream = Buffer.concat(chromeChunks('webm-opus'));
const starts = (units: Array<{ start?: number }>) => units.flatMap((u) => (u.start === undefined ? [] : [u.start]));

describe('WebM continuation at a handover', () => {
  it('a successor primed with the headers and the continuation parses the rest as the owner would, from any cut', () => {
    const whole = new WebmParser().push(stream);
    const init = Buffer.concat(whole.filter((u) => u.header).map((u) => u.bytes));
    for (let cut = init.length + 40; cut < stream.length - 1000; cut += 997) {
      // a lone last element waits for the next to verify it
      const owner = new WebmParser();
      const before = owner.push(stream.subarray(0, cut));
      const continuation = owner.continuation();
      assert.ok(continuation, `a continuation at byte ${cut}`);
      const successor = new WebmParser();
      successor.push(init);
      successor.push(continuation.bytes);
      successor.gap(continuation.expect);
      const after = successor.push(stream.subarray(cut));
      assert.equal(successor.gapBytes, 0, `nothing skipped after byte ${cut}`);
      assert.deepEqual(
        [...starts(before), ...starts(after)],
        starts(whole),
        `the same blocks at the same times after byte ${cut}`,
      );
    }
  });

  it("the stream's last element after the seam comes out when the client's input pauses (its end): no element after it will vouch for it", () => {
    const whole = new WebmParser().push(stream);
    const init = Buffer.concat(whole.filter((u) => u.header).map((u) => u.bytes));
    const lastAt = stream.length - whole.at(-1)!.bytes.length;
    for (const cut of [lastAt, lastAt + 7]) {
      // the owner stopped right before the last block, or inside it
      const owner = new WebmParser();
      const before = owner.push(stream.subarray(0, cut));
      const c = owner.continuation()!;
      const successor = new WebmParser();
      successor.push(init);
      successor.push(c.bytes);
      successor.gap(c.expect);
      const after = [...successor.push(stream.subarray(cut)), ...(successor.pause?.() ?? [])];
      assert.deepEqual(
        [...starts(before), ...starts(after)],
        starts(whole),
        `every block, the last one too (cut at ${cut})`,
      );
    }
  });

  it("the replay of a continuation taken up mid-Cluster starts its first block at 0, and its offset is that block's time", () => {
    const whole = new WebmParser().push(stream);
    const init = Buffer.concat(whole.filter((u) => u.header).map((u) => u.bytes));
    const blocks = whole.filter((u) => u.start !== undefined);
    const mid = blocks.findIndex(
      (u, i) => i > 20 && u.start! > blocks[i - 1].start! && whole[whole.indexOf(u) - 1].start !== undefined,
    ); // not a Cluster's first block
    const cut = stream.indexOf(blocks[mid].bytes);
    const owner = new WebmParser();
    owner.push(stream.subarray(0, cut));
    const successor = new WebmParser();
    const replay = createReplayBuffer('webm', { maxBytes: 1 << 20 });
    const c = owner.continuation()!;
    for (const u of [
      ...successor.push(init),
      ...successor.push(c.bytes),
      ...successor.gap(c.expect),
      ...successor.push(stream.subarray(cut)),
    ])
      replay.add(u);
    const r = replay.replay();
    assert.ok(
      Math.abs(r.offset - blocks[mid].start!) < 1e-9,
      `offset ${r.offset} = the first block's time ${blocks[mid].start}`,
    );
    const replayed = new WebmParser().push(Buffer.concat(r.frames));
    assert.equal(starts(replayed)[0], 0, 'the first block at 0');
    assert.deepEqual(
      starts(replayed).map((s) => Number((s + r.offset).toFixed(6))),
      starts(whole)
        .slice(mid)
        .map((s) => Number(s.toFixed(6))),
      'the rest at its times, moved by the offset',
    );
  });

  it("a continuation that does not follow on (a message lost in flight, with a new Cluster's head in it) is skipped to the next Cluster, never mistimed", () => {
    const whole = new WebmParser().push(stream);
    const init = Buffer.concat(whole.filter((u) => u.header).map((u) => u.bytes));
    const at = (k: number) => whole.slice(0, k).reduce((n, u) => n + u.bytes.length, 0);
    const isCluster = (k: number) => whole[k].bytes.readUInt32BE(0) === 0x1f43b675;
    const k = whole.findIndex((_, i) => i > 30 && isCluster(i));
    const next = whole.findIndex((_, i) => i > k && isCluster(i));
    for (const partial of [0, 5]) {
      // the owner stopped between two blocks, or inside one
      const owner = new WebmParser();
      owner.push(stream.subarray(0, at(k - 2) + partial)); // two blocks before a Cluster...
      const c = owner.continuation()!;
      const successor = new WebmParser();
      successor.push(init);
      successor.push(c.bytes);
      successor.gap(c.expect);
      const after = starts(successor.push(stream.subarray(at(k + 4)))); // ...to a block inside it
      assert.ok(successor.gapBytes > 0, 'skipped');
      assert.deepEqual(after, starts(whole.slice(next)), `from the next Cluster on, at their own times (${partial})`);
    }
  });
});
