// The client audio inbox: one copy per piece, batching only for tiny frames, and no buffer held by a
// session whose client is not sending tiny frames (thousands of sessions share one process).
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, it } from 'vitest';
import { HEADROOM } from '../../src/audio/containers/byte-queue.js';
import { AudioInbox } from '../../src/session/inbox.js';
import { chromeChunks } from '../support/fixtures.js';
import { memoryAfterGc } from '../support/gc.js';

/** What uWS hands the callback: an ArrayBuffer of the frame's bytes (reused after the callback). */
const frame = (b: Buffer): ArrayBuffer => b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer;

describe('audio inbox', () => {
  it('a browser piece goes on at once, as its own copy', () => {
    const got: Buffer[] = [];
    const inbox = new AudioInbox((audio) => got.push(audio));
    const pieces = chromeChunks('webm-opus').slice(0, 3);
    for (const piece of pieces) {
      const uwsBuffer = frame(piece);
      inbox.add(uwsBuffer);
      new Uint8Array(uwsBuffer).fill(0); // uWS reuses its buffer once the callback returns
    }
    assert.equal(got.length, 3, 'each piece delivered in the callback that brought it, not a turn later');
    for (const [i, audio] of got.entries()) {
      assert.ok(audio.equals(pieces[i]), `piece ${i} intact`);
      assert.ok(
        audio.buffer.byteLength <= pieces[i].length + HEADROOM,
        `piece ${i} holds its own bytes (and room for a parser's leftover)`,
      );
    }
    assert.equal(inbox.bufferedBytes, 0);
  });

  it('tiny frames are batched, and order is kept around a piece that goes on at once', async () => {
    const got: Buffer[] = [];
    const inbox = new AudioInbox((audio) => got.push(audio));
    const piece = chromeChunks('webm-opus')[0];
    inbox.add(frame(Buffer.from('ab')));
    inbox.add(frame(Buffer.from('cd')));
    inbox.add(frame(piece));
    inbox.add(frame(Buffer.from('ef')));
    assert.equal(inbox.bufferedBytes, 2);
    await nextTurn();
    assert.deepEqual(
      got.map((b) => b.length),
      [4, piece.length, 2],
    );
    assert.equal(Buffer.concat(got).toString('latin1'), `abcd${piece.toString('latin1')}ef`);
    for (const [i, audio] of got.entries())
      assert.ok(
        audio.buffer.byteLength <= audio.length + HEADROOM,
        `delivery ${i} holds its own bytes (and room for a parser's leftover)`,
      );
  });

  it('a small piece alone in its turn (20 ms Opus at 32 kb/s: about 1 KB per 250 ms) is one copy of its own', async () => {
    const got: Buffer[] = [];
    const inbox = new AudioInbox((audio) => got.push(audio));
    const pieces = [1000, 700, 1023].map((n, i) => Buffer.alloc(n, i + 1));
    for (const piece of pieces) {
      const uwsBuffer = frame(piece);
      inbox.add(uwsBuffer);
      new Uint8Array(uwsBuffer).fill(0);
      assert.equal(inbox.bufferedBytes, piece.length, 'it waits for the end of the turn');
      await nextTurn();
    }
    assert.equal(got.length, 3);
    for (const [i, audio] of got.entries()) {
      assert.ok(audio.equals(pieces[i]), `piece ${i} intact`);
      // Kept for a replay for seconds: a piece that pinned a pool slab or a batch buffer would hold 8-16 KiB.
      assert.ok(
        audio.buffer.byteLength <= pieces[i].length + HEADROOM,
        `piece ${i} holds its own bytes (and room for a parser's leftover)`,
      );
    }
  });

  it('small frames after a mid-turn flush are batched again, in order', async () => {
    const got: Buffer[] = [];
    const inbox = new AudioInbox((audio) => got.push(audio));
    inbox.add(frame(Buffer.from('one ')));
    inbox.add(frame(Buffer.from('two ')));
    inbox.flush(); // a text message came in between; the turn's batch buffer stays for reuse
    inbox.add(frame(Buffer.from('three ')));
    inbox.add(frame(Buffer.from('four')));
    await nextTurn();
    assert.deepEqual(
      got.map((b) => b.toString()),
      ['one two ', 'three four'],
    );
  });

  it('2,000 sessions that each got a few bytes hold no batch buffer once they were delivered', async () => {
    const inboxes: AudioInbox[] = [];
    const kept: Buffer[] = [];
    await nextTurn();
    const before = (await memoryAfterGc()).arrayBuffers;
    for (let i = 0; i < 2000; i++) {
      const inbox = new AudioInbox((audio) => kept.push(audio));
      inbox.add(frame(Buffer.from('tiny frame')));
      inboxes.push(inbox);
    }
    await nextTurn();
    const held = (await memoryAfterGc()).arrayBuffers - before;
    assert.equal(kept.length, 2000);
    assert.ok(held < 4 * 1024 * 1024, `2,000 idle inboxes hold ${(held / 1e6).toFixed(1)} MB`);
    assert.equal(inboxes.length, 2000);
  });
});
