// A session's lifecycle stream: a listener that throws (a ledger or a server set gone wrong) is told to
// the session and keeps no other listener from the event; the session's own work is not thrown on.
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { Lifecycle, type LifecycleEvent } from '../../src/session/lifecycle.js';

test('every listener hears every event, in order, even after one throws; the failure is told, not thrown', () => {
  const failures: Array<[string, string]> = [];
  const lifecycle = new Lifecycle((err, e) => failures.push([(err as Error).message, e.type]));
  const heard: string[] = [];
  lifecycle.on((e) => heard.push(`a:${e.type}`));
  lifecycle.on(() => {
    throw new Error('ledger down');
  });
  lifecycle.on((e) => heard.push(`c:${e.type}`));
  const events: LifecycleEvent[] = [{ type: 'opened', restored: false }, { type: 'finished' }];
  for (const e of events) assert.doesNotThrow(() => lifecycle.emit(e));
  assert.deepEqual(heard, ['a:opened', 'c:opened', 'a:finished', 'c:finished']);
  assert.deepEqual(failures, [
    ['ledger down', 'opened'],
    ['ledger down', 'finished'],
  ]);
});
