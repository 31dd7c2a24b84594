// One timer for every session: partial and paced frames of many sessions wait on one clock timer.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { Alarm, Scheduler } from '../../src/audio/scheduler.js';
import { FakeClock, chromeChunks, fixture, open } from './helpers.js';

test('alarms fire in due order, once, on one clock timer; cleared and re-set ones follow their last setting', () => {
  const clock = new FakeClock();
  const s = new Scheduler(clock);
  const fired: string[] = [];
  const a = new Alarm(s, () => fired.push('a')),
    b = new Alarm(s, () => fired.push('b')),
    c = new Alarm(s, () => fired.push('c'));
  a.at(30);
  b.at(10);
  c.at(20);
  assert.equal(clock.pending, 1, 'one clock timer for three alarms');
  c.clear();
  a.at(5); // re-set earlier
  clock.advance(100);
  assert.deepEqual(fired, ['a', 'b']);
  assert.equal(clock.pending, 0, 'no timer left once nothing waits');
});

test('an alarm that throws does not stop the others', () => {
  const clock = new FakeClock();
  const s = new Scheduler(clock);
  const fired: number[] = [];
  new Alarm(s, () => {
    throw new Error('owner bug');
  }).at(10);
  new Alarm(s, () => fired.push(1)).at(10);
  new Alarm(s, () => fired.push(2)).at(20);
  clock.advance(50);
  assert.deepEqual(fired, [1, 2]);
});

test('a hundred sessions with partial and paced frames wait on one clock timer', () => {
  const clock = new FakeClock();
  // Every session on the same clock, as every session of a process is on the real one.
  const runs = Array.from({ length: 100 }, () => open('audio/webm', { chunkMs: 1000, clock }));
  const head = Buffer.concat(chromeChunks('webm-opus')).subarray(0, 3396 + 300); // a partial frame
  const file = fixture('dictation.webm'); // paced: 26 s of media at once
  for (const [i, run] of runs.entries()) run.pipeline.push(i % 2 ? head : file);
  assert.equal(clock.pending, 1, `${clock.pending} clock timers`);
  clock.advance(1000);
  assert.ok(runs.every((r) => r.frames.length > 0));
  for (const r of runs) r.pipeline.close();
  assert.equal(clock.pending, 0);
});
