// Test support: whether a replica stays responsive while a test loads it.
import assert from 'node:assert/strict';
import { delay } from './wait.js';

/** Asks /healthz on `port` every 100 ms for `ms`, asserting 200 each time, and resolves with the
 *  slowest answer's lateness: how long after it was due it came (a stalled event loop delays both the
 *  asking and the answer). `each(leftMs)` runs after every answer, with the time left. */
export async function watchHealth(port: number, ms: number, each?: (leftMs: number) => void): Promise<number> {
  const healthz = `http://127.0.0.1:${port}/healthz`;
  let slowest = 0;
  const end = Date.now() + ms;
  let due = performance.now();
  while (Date.now() < end) {
    assert.equal((await fetch(healthz)).status, 200);
    slowest = Math.max(slowest, performance.now() - due);
    each?.(end - Date.now());
    due = Math.max(due + 100, performance.now());
    await delay(due - performance.now());
  }
  return slowest;
}
