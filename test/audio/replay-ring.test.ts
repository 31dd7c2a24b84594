// The replay audio is copied into one buffer per session, reused as finals release it: the client's
// pieces are not held by the replay (they would be promoted and wait for a major GC), what a replay
// sends is unchanged, and the buffer stays near the size of what it keeps.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, it } from 'vitest';
import { createReplayBuffer } from '../../src/audio/replay.js';
import { AudioRing, RING_MIN_BYTES } from '../../src/audio/replay/ring.js';
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

describe('replay audio ring', () => {
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
    assert.ok(replay.bufferedBytes > 0);
  });

  it('spans stay intact through wraps, growth and shrinking, and the buffer follows what is kept', () => {
    const rnd = prng(22);
    const ring = new AudioRing();
    const kept: { view: Buffer; want: Buffer }[] = [];
    let live = 0,
      wraps = 0,
      lastTail = 0;
    /** resize() replaces the views in the lists it is given: they are read back. */
    const resize = (bytes: number) => {
      const views = kept.map((k) => k.view);
      ring.resize([views], bytes);
      views.forEach((v, i) => (kept[i].view = v));
      lastTail = views.length ? views[views.length - 1].byteOffset + views[views.length - 1].length : 0;
    };
    for (let step = 0; step < 20_000; step++) {
      if (rnd() < 0.55) {
        const want = Buffer.alloc(1 + Math.floor(rnd() * (rnd() < 0.05 ? 20_000 : 3000)), step % 251);
        let view = ring.put(want);
        if (!view) {
          resize(live + want.length);
          view = ring.put(want);
        }
        assert.ok(view, 'room after a resize');
        if (view.byteOffset < lastTail) wraps++;
        lastTail = view.byteOffset + view.length;
        kept.push({ view, want });
        live += want.length;
      } else {
        for (let n = Math.floor(rnd() * 4); n > 0 && kept.length > 0; n--) live -= kept.shift()!.want.length;
        ring.free(kept[0]?.view);
        if (ring.oversized(live)) resize(live);
      }
      for (const k of kept) assert.ok(k.view.equals(k.want), `a kept span changed at step ${step}`);
      assert.ok(
        ring.capacity <= Math.max(RING_MIN_BYTES, 4 * (live + 20_000)),
        `capacity ${ring.capacity} for ${live} bytes kept`,
      );
    }
    assert.ok(wraps > 100, `the ring wrapped (${wraps} times)`);
  });
});
