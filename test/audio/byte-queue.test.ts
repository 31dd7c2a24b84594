// The parsers' input queue: reads across client messages without joining more than it must.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { ByteQueue, pieceCopy } from '../../src/audio/containers/byte-queue.js';
import { WebmParser } from '../../src/audio/containers/webm.js';
import { chromeChunks } from '../support/fixtures.js';

test('an empty queue peeks and takes nothing; reads across chunks see the bytes in order', () => {
  const q = new ByteQueue();
  assert.equal(q.peek(0).length, 0);
  assert.equal(q.takeAll().length, 0);
  for (const s of ['ab', 'c', 'defg']) q.push(Buffer.from(s));
  assert.equal(q.indexOf(0x66, 0), 5); // 'f', in the third chunk, found without joining
  assert.equal(q.window(1, 4).toString(), 'bcde');
  assert.equal(q.take(1).toString(), 'a');
  assert.equal(q.peek(3).toString(), 'bcd');
  assert.equal(q.indexOf(0x66, 0), 4);
  assert.equal(q.takeAll().toString(), 'bcdefg');
  assert.equal(q.length, 0);
  assert.equal(q.offset, 7);
});

test("Chromium's pieces are each copied once: the byte a piece ends into the next element goes in front of the next", () => {
  // Every Chromium WebM piece ends one byte into the next SimpleBlock. Joining that byte with the
  // next piece used to copy the whole piece a second time; now its units are views of its own copy.
  const parser = new WebmParser();
  let checked = 0;
  const out: Buffer[] = [];
  for (const [k, received] of chromeChunks('webm-opus').entries()) {
    const piece = pieceCopy(received); // as the inbox copies each piece, as it comes
    const units = parser.push(piece);
    out.push(...units.map((u) => u.bytes));
    if (k === 0) continue;
    for (const u of units) assert.equal(u.bytes.buffer, piece.buffer, `a unit of piece ${k} is in a second copy`);
    checked += units.length;
  }
  assert.ok(checked > 100, `${checked} units checked`);
  const input = Buffer.concat(chromeChunks('webm-opus'));
  assert.ok(
    Buffer.concat(out).equals(input.subarray(0, Buffer.concat(out).length)),
    'the units are the input, in order',
  );
});

test('the headroom is used by one queue, once, and only for a few bytes; otherwise pieces are joined as before', () => {
  const q = new ByteQueue();
  const a = pieceCopy(Buffer.from('abc'));
  const b = pieceCopy(Buffer.from('defg'));
  q.push(a); // not the newest copy: its headroom is not written
  q.push(b); // the newest: 'abc' goes in front of it
  assert.equal(q.peek(7).toString(), 'abcdefg');
  assert.equal(q.peek(7).buffer, b.buffer, 'the leftover went into the headroom in front of the newest piece');

  const big = new ByteQueue();
  big.push(Buffer.from('x'.repeat(40)));
  const c = pieceCopy(Buffer.from('yz'));
  big.push(c); // 40 bytes do not fit in front of it
  const all = big.takeAll();
  assert.equal(all.toString(), 'x'.repeat(40) + 'yz');
  assert.notEqual(all.buffer, c.buffer);

  // The same piece pushed to a second queue must not write the headroom the first one filled.
  const d = pieceCopy(Buffer.from('kl'));
  const q1 = new ByteQueue(),
    q2 = new ByteQueue();
  q1.push(Buffer.from('1'));
  q1.push(d);
  q2.push(Buffer.from('2'));
  q2.push(d);
  assert.equal(q2.takeAll().toString(), '2kl');
  assert.equal(q1.takeAll().toString(), '1kl');
});
