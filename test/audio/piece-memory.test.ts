// A client's piece is freed as soon as the session is done with it: once no kept replay group and no
// header lies in it and the pipeline reads nothing of it any more. Until V8 collects it a piece that
// lived a second or two (kept for a replay) would otherwise stay, with every other session's, until
// the next major collection. Freeing must never touch a byte still to be sent or replayed.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  createAudioPipeline,
  createReplayBuffer,
  freePiece,
  pieceCopy,
  type ReplayBuffer,
  type Unit,
} from '../../src/audio/index.js';
import { createParser } from '../../src/audio/source.js';
import { evenChunks } from '../support/fixtures.js';
import { chromeChunks, FakeClock, fixture, plan } from './helpers.js';

const canDetach = typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer === 'function';
/** Chromium's recording: 31 pieces of about 0.3 s, the first with the headers. */
const pieces = chromeChunks('webm-opus');
const MAX = 1 << 20;

/** A piece copied as the inbox copies it when it arrives (the parser may use the room in front of the
 *  newest copy); the copy is noted in `copies`. */
function copied(piece: Buffer, copies: Buffer[]): Buffer {
  const c = pieceCopy(piece);
  copies.push(c);
  return c;
}

/** The same units kept in memory of their own, never freed: what a replay must still equal. */
function twinOf(): { replay: ReplayBuffer; add(u: Unit): void } {
  const replay = createReplayBuffer('webm', { maxBytes: MAX });
  return { replay, add: (u) => replay.add({ ...u, bytes: Buffer.from(u.bytes) }) };
}

describe.skipIf(!canDetach)('client piece memory', () => {
  it('a piece no kept group, header or unparsed byte lies in is freed at the release; a replay is unchanged', () => {
    const parser = createParser('webm', { runSeconds: 0.125 });
    const replay = createReplayBuffer('webm', {
      maxBytes: MAX,
      unreferenced: (m) => !parser.holds!(m) && freePiece(m),
    });
    const twin = twinOf();
    const copies: Buffer[] = [];
    for (const p of pieces)
      for (const u of parser.push(copied(p, copies))) {
        replay.add(u);
        twin.add(u);
      }
    replay.release(5);
    twin.replay.release(5);
    const freed = copies.map((c) => c.buffer.byteLength === 0);
    // Finals up to 5 s release the Clusters before the one that holds 5 s: pieces 1 to about 14.
    assert.ok(freed.filter(Boolean).length >= 10, `freed: ${freed.map(Number).join('')}`);
    assert.equal(freed[0], false, 'the headers lie in the first piece');
    assert.equal(freed.at(-1), false, 'the newest piece holds the open group');
    assert.ok(!freed.slice(freed.lastIndexOf(true) + 1).some(Boolean), 'only the oldest pieces go');
    assert.deepEqual(replay.replay(), twin.replay.replay());
  });

  it('so with Ogg/Opus (Firefox records Ogg): what the oldest pages lie in goes, the headers stay, a replay is unchanged', () => {
    const parser = createParser('ogg');
    let freed = 0;
    const replay = createReplayBuffer('ogg', {
      maxBytes: MAX,
      unreferenced: (m) => !parser.holds!(m) && freePiece(m) && freed++,
    });
    const twin = createReplayBuffer('ogg', { maxBytes: MAX });
    const copies: Buffer[] = [];
    // Pieces cut anywhere: a page across two is read from a join of them, which is what is freed.
    for (const p of evenChunks(fixture('dictation.ogg'), 4000))
      for (const u of parser.push(copied(p, copies))) {
        replay.add(u);
        twin.add({ ...u, bytes: Buffer.from(u.bytes) });
      }
    replay.release(8);
    twin.release(8);
    assert.ok(freed >= 3, `${freed} freed of ${copies.length} pieces`);
    assert.notEqual(copies[0].buffer.byteLength, 0, 'the headers lie in the first piece');
    assert.deepEqual(replay.replay(), twin.replay());
  });

  it('a piece whose frame still waits to be paced upstream is not freed, and goes upstream whole', () => {
    const clock = new FakeClock();
    const sent: Buffer[] = [];
    const kept: { replay?: ReplayBuffer } = {};
    const pipeline = createAudioPipeline({
      plan: plan('audio/webm;codecs=opus'),
      chunkMs: 250,
      pace: 1,
      maxBufferedBytes: MAX,
      clock,
      onFrame: (f) => sent.push(Buffer.from(f)),
      onUnit: (u) => kept.replay!.add(u),
      onError: (e) => assert.fail(e.details),
    });
    kept.replay = createReplayBuffer('webm', {
      maxBytes: MAX,
      unreferenced: (m) => !pipeline.holds(m) && freePiece(m),
    });
    // Nine seconds of audio at once: paced, most of it waits.
    const copies: Buffer[] = [];
    for (const p of pieces) pipeline.push(copied(p, copies));
    const before = sent.length;
    kept.replay.release(8); // as if finals had come for audio still waiting
    assert.deepEqual(
      copies.map((c) => c.buffer.byteLength === 0),
      copies.map(() => false),
      'every piece is still read by the pacer or the parser',
    );
    while (clock.step());
    assert.ok(sent.length > before);
    assert.deepEqual(Buffer.concat(sent), Buffer.concat(pieces));
  });
});
