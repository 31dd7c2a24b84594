// The parsers' input queue: reads across client messages without joining more than it must.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { ByteQueue } from '../../src/audio/containers/byte-queue.js';

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
