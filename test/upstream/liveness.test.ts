// The half-open upstream finder on its own, on vitest's fake clock: when it pings, what keeps the
// connection alive, and when it gives up. No socket and no real time: the rules, to the millisecond.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, vi } from 'vitest';
import { LivenessWatch } from '../../src/upstream/liveness.js';

function watched() {
  const w = { pings: 0, dead: [] as string[], open: true };
  const watch = new LivenessWatch(
    { pingMs: 150, pongTimeoutMs: 200 },
    { isOpen: () => w.open, ping: () => w.pings++, dead: (m) => w.dead.push(m) },
  );
  return { w, watch };
}

describe('upstream liveness', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('pings once the connection has been quiet for pingMs, not before', () => {
    const { w, watch } = watched();
    watch.start();
    vi.advanceTimersByTime(149);
    assert.equal(w.pings, 0);
    vi.advanceTimersByTime(1);
    assert.equal(w.pings, 1);
  });

  it('anything heard keeps it quiet-free: traffic every 50 ms never draws a ping', () => {
    const { w, watch } = watched();
    watch.start();
    for (let i = 0; i < 40; i++) {
      vi.advanceTimersByTime(50);
      watch.heard();
    }
    assert.equal(w.pings, 0);
    assert.deepEqual(w.dead, []);
  });

  it('an answered ping keeps it alive; the next ping follows the next quiet spell', () => {
    const { w, watch } = watched();
    watch.start();
    vi.advanceTimersByTime(150); // ping 1
    vi.advanceTimersByTime(20);
    watch.heard(); // its pong
    vi.advanceTimersByTime(180); // the pong timeout passes: answered, so quiet since the pong
    assert.deepEqual(w.dead, []);
    vi.advanceTimersByTime(150);
    assert.equal(w.pings, 2);
  });

  it('an unanswered ping is given up on after pongTimeoutMs, with the reason', () => {
    const { w, watch } = watched();
    watch.start();
    vi.advanceTimersByTime(150 + 199);
    assert.deepEqual(w.dead, []);
    vi.advanceTimersByTime(1);
    assert.deepEqual(w.dead, ['the speech service stopped answering (no pong in 0.2 s)']);
  });

  it('stopped, or its connection closing, it does nothing more', () => {
    const a = watched();
    a.watch.start();
    a.watch.stop();
    vi.advanceTimersByTime(10_000);
    assert.equal(a.w.pings, 0);
    const b = watched();
    b.watch.start();
    b.w.open = false;
    vi.advanceTimersByTime(10_000);
    assert.equal(b.w.pings, 0);
    assert.deepEqual(b.w.dead, []);
  });
});
