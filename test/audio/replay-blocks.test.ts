// The replay audio is copied into pooled blocks that finals give back: the client's pieces are not
// held by the replay (they would be promoted and wait for a major GC), what a replay sends is
// unchanged, blocks reused by other sessions never change a span still kept, and a session holds
// little more than the audio it keeps.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, it } from 'vitest';
import { createReplayBuffer } from '../../src/audio/replay.js';
import { BLOCK_BYTES, BlockStore } from '../../src/audio/replay/blocks.js';
import { createParser } from '../../src/audio/source.js';
import { chromeChunks, prng } from '../support/fixtures.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A piece as the inbox delivers it: an exact copy with an ArrayBuffer of its own. */
const own = (b: Buffer) => Buffer.from(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));

/** Feeds Chrome's pieces through the WebM parser into a replay buffer; returns weak references to
 *  the buffers its media units were views of (a client's piece, or the parser's join of two). */
function feed(replay: ReturnType<typeof createReplayBuffer>): WeakRef<object>[] {
  const parser = createParser('webm');
  const seen = new Set<object>();
  for (const chunk of chromeChunks('webm-opus'))
    for (const u of parser.push(own(chunk))) {
      if (!u.header) seen.add(u.bytes.buffer);
      replay.add(u);
    }
  return [...seen].map((b) => new WeakRef(b));
}

describe('replay audio in pooled blocks', () => {
  it('keeps copies: the client pieces are freed, and the replay is the same bytes', async () => {
    const replay = createReplayBuffer('webm', { maxBytes: 1 << 20 });
    const refs = feed(replay);
    const before = Buffer.concat(replay.replay().frames);
    for (let i = 0; i < 3; i++) {
      gc();
      await delay(10);
    }
    const alive = refs.filter((r) => r.deref() !== undefined).length;
    // The first piece holds the init data the format keeps for good; the parser may hold the last.
    assert.ok(refs.length > 10, `${refs.length} client buffers`);
    assert.ok(alive <= 2, `${alive} of ${refs.length} client buffers still held after a collection`);
    assert.ok(Buffer.concat(replay.replay().frames).equals(before), 'the replay sends the same bytes');
  });

  it("sessions sharing the pool never change each other's kept spans, and hold little more than them", () => {
    const rnd = prng(22);
    const sessions = [0, 1, 2].map(() => ({ store: new BlockStore(), kept: [] as { view: Buffer; want: Buffer }[] }));
    let reused = 0;
    const seen = new Set<object>();
    for (let step = 0; step < 30_000; step++) {
      const s = sessions[Math.floor(rnd() * sessions.length)];
      if (rnd() < 0.55) {
        // Units as a browser's WebM has them (60 ms Opus blocks), now and then a big one.
        const want = Buffer.alloc(rnd() < 0.01 ? 9000 : 1 + Math.floor(rnd() * 600), step % 251);
        const view = s.store.put(want);
        if (seen.has(view.buffer) && view.byteOffset === 0) reused++;
        seen.add(view.buffer);
        s.kept.push({ view, want });
      } else {
        s.kept.splice(0, Math.floor(rnd() * 6));
        s.store.free(s.kept[0]?.view);
      }
      for (const t of sessions) {
        for (const k of t.kept) assert.ok(k.view.equals(k.want), `a kept span changed at step ${step}`);
        const live = t.kept.reduce((n, k) => n + k.want.length, 0);
        // the oldest block's freed head, the newest one's free tail, a tail left before a big unit's own block
        assert.ok(
          t.store.bytes <= live * 1.2 + 3 * BLOCK_BYTES,
          `a store holds ${t.store.bytes} bytes of blocks for ${live} bytes kept (step ${step})`,
        );
      }
    }
    assert.ok(reused > 100, `blocks were reused (${reused} times)`);
  });
});
