// Reconnection backoff with jitter: sessions that lost one upstream together (an upstream restart)
// must not come back in lockstep, and each delay stays within its backoff step.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { reconnectDelay } from '../../src/session/upstream-link.js';

describe('reconnectDelay', () => {
  it('differs across sessions and stays within half to all of its step (0.2 s doubled, at most 5 s)', () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const step = Math.min(5000, 200 * 2 ** attempt);
      const sessions = Array.from({ length: 1000 }, () => reconnectDelay(attempt));
      for (const d of sessions)
        assert.ok(d >= step / 2 && d <= step, `attempt ${attempt}: ${d} ms within [${step / 2}, ${step}]`);
      assert.ok(
        new Set(sessions.map((d) => Math.round(d))).size > Math.min(step / 2, 1000) * 0.5,
        `attempt ${attempt}: the delays are spread`,
      );
      const spread = Math.max(...sessions) - Math.min(...sessions);
      assert.ok(
        spread > step * 0.4,
        `attempt ${attempt}: 1000 sessions span most of the jitter window (${spread.toFixed(0)} of ${step / 2} ms)`,
      );
    }
  });

  it('is the backoff step scaled by the random draw: half the step at 0, the whole step at 1', () => {
    assert.equal(
      reconnectDelay(0, () => 0),
      100,
    );
    assert.equal(
      reconnectDelay(0, () => 1),
      200,
    );
    assert.equal(
      reconnectDelay(3, () => 0.5),
      1200,
    );
    assert.equal(
      reconnectDelay(20, () => 1),
      5000,
    );
  });
});
