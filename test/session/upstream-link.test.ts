// The upstream link's parts on their own: the reconnection budget (what is one incident, when it is
// spent, what the client is told), the flush/end messages held and asked again, and the bound on the
// audio replayed over a session.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, vi } from 'vitest';
import type { ReplayBuffer, Unit } from '../../src/audio/index.js';
import type { UpstreamConnection } from '../../src/upstream/index.js';
import { PendingControls } from '../../src/session/upstream-link-controls.js';
import { Reconnects } from '../../src/session/upstream-link-reconnect.js';
import { ReplayKeeper } from '../../src/session/upstream-link-replay.js';

describe('Reconnects', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());
  const policy = { attempts: 3, maxSeconds: 30, replayBytes: 0 };
  const closed = {
    errorId: 'UPSTREAM_CLOSED' as const,
    details: 'the speech service closed the connection (code 1006)',
  };

  it('tries `attempts` times with backoff, then reports the loss that started it and the last failure', () => {
    const r = new Reconnects(policy);
    let connects = 0;
    r.lost(closed);
    r.begin();
    assert.equal(r.reconnecting, true);
    for (let i = 0; i < 3; i++) {
      assert.equal(
        r.next(() => connects++),
        undefined,
      );
      vi.advanceTimersByTime(5000);
      assert.equal(connects, i + 1);
      r.lost({ errorId: 'UPSTREAM_UNAVAILABLE', details: `refused ${i}` });
    }
    assert.deepEqual(
      r.next(() => connects++),
      {
        errorId: 'UPSTREAM_CLOSED',
        details: `${closed.details}; reconnecting failed after 3 attempts in 15.0 s (last: refused 2)`,
      },
    );
    vi.advanceTimersByTime(60_000);
    assert.equal(connects, 3);
  });

  it('gives up when the time is up, however many attempts are left', () => {
    const r = new Reconnects({ ...policy, attempts: 100, maxSeconds: 2 });
    r.lost(closed);
    r.begin();
    assert.equal(
      r.next(() => {}),
      undefined,
    );
    vi.advanceTimersByTime(2000);
    assert.match(r.next(() => {})?.details ?? '', /reconnecting failed after 1 attempts in 2\.0 s/);
  });

  it('a replacement lost again before it stayed up is the same incident: flapping, UPSTREAM_UNSTABLE', () => {
    const r = new Reconnects({ ...policy, attempts: 1 });
    r.lost(closed);
    r.begin();
    assert.equal(
      r.next(() => {}),
      undefined,
    );
    r.ready(true);
    assert.equal(r.reconnecting, false);
    vi.advanceTimersByTime(9_999);
    r.begin();
    assert.deepEqual(
      r.next(() => {}),
      {
        errorId: 'UPSTREAM_UNSTABLE',
        details:
          'the speech service connection was lost again 1 times within 10 s of being replaced (1 attempts in 10.0 s)',
      },
    );
  });

  it('a replacement that stayed up 10 s ends the incident: the next loss has the whole budget', () => {
    const r = new Reconnects({ ...policy, attempts: 1 });
    r.lost(closed);
    r.begin();
    r.next(() => {});
    r.ready(true);
    vi.advanceTimersByTime(10_000);
    r.begin();
    assert.equal(
      r.next(() => {}),
      undefined,
    );
    assert.equal(r.attempts, 1);
  });

  it('a fresh start (a session taken over) has the whole budget whatever came before', () => {
    const r = new Reconnects({ ...policy, attempts: 1 });
    r.lost(closed);
    r.begin();
    r.next(() => {});
    r.ready(true);
    r.begin(true);
    assert.equal(
      r.next(() => {}),
      undefined,
    );
  });

  it('cancel() stops the attempt waiting for its backoff', () => {
    const r = new Reconnects(policy);
    let connects = 0;
    r.begin();
    r.next(() => connects++);
    r.cancel();
    vi.advanceTimersByTime(60_000);
    assert.equal(connects, 0);
  });
});

describe('PendingControls', () => {
  const conn = () => {
    const sent: unknown[] = [];
    return { sent, c: { sendJson: (m: unknown) => sent.push(m) } as unknown as UpstreamConnection };
  };

  it('holds flush/end in order, one end only, at most three', () => {
    const p = new PendingControls();
    assert.equal(p.hold({ type: 'flush' }), true);
    assert.equal(p.hold({ type: 'end' }), true);
    assert.equal(p.hold({ type: 'end' }), false);
    assert.equal(p.hold({ type: 'flush' }), true);
    assert.throws(() => p.hold({ type: 'flush' }), /more than 3 flush\/end messages/);
    assert.deepEqual(p.takeAll(), [{ type: 'flush' }, { type: 'end' }, { type: 'flush' }]);
    assert.deepEqual(p.takeAll(), []);
  });

  it('flushes not answered are asked again first; answered ones are not', () => {
    const p = new PendingControls();
    const a = conn();
    p.send({ type: 'flush' }, a.c);
    p.send({ type: 'flush' }, a.c);
    p.send({ type: 'flush' }, a.c);
    p.flushed();
    p.hold({ type: 'end' });
    assert.deepEqual(p.takeAll(), [{ type: 'flush' }, { type: 'flush' }, { type: 'end' }]);
    p.flushed(); // an answer with none out changes nothing
    p.send({ type: 'flush' }, a.c);
    assert.deepEqual(p.takeAll(), [{ type: 'flush' }]);
    assert.equal(a.sent.length, 4);
  });

  it('one end per upstream session', () => {
    const p = new PendingControls();
    const a = conn(),
      b = conn();
    p.send({ type: 'end' }, a.c);
    p.send({ type: 'end' }, a.c);
    p.send({ type: 'end' }, b.c);
    assert.deepEqual(a.sent, [{ type: 'end' }]);
    assert.deepEqual(b.sent, [{ type: 'end' }]);
  });
});

describe('ReplayKeeper', () => {
  /** A replay buffer that keeps every unit and releases nothing. */
  function buffer(): ReplayBuffer {
    const kept: Buffer[] = [];
    return {
      add: (u: Unit) => (kept.push(u.bytes), u),
      release: () => {},
      replay: () => ({ frames: [...kept], offset: 1.5, bytes: kept.reduce((n, b) => n + b.length, 0) }),
      resumePoint: () => undefined,
      get bufferedBytes() {
        return kept.reduce((n, b) => n + b.length, 0);
      },
      droppedBytes: 0,
    };
  }
  const unit = (n: number) => ({ bytes: Buffer.alloc(n) }) as Unit;

  it('replays at most 4 times the audio that went upstream once over a session', () => {
    let made = 0;
    const k = new ReplayKeeper({ createReplay: () => (made++, buffer()), maxBytes: 1000 });
    assert.equal(k.take(0)?.bytes, 0, 'nothing kept yet: an empty replay from the last final');
    k.unit(unit(100), 'other');
    k.unit(unit(100), 'other');
    assert.equal(made, 1);
    for (let i = 0; i < 4; i++) assert.equal(k.take(0)?.bytes, 200, `replay ${i + 1}`);
    assert.equal(k.take(0), undefined);
    assert.deepEqual(k.spent(), {
      replayedBytes: 800,
      unitBytes: 200,
      details:
        'the speech service connection kept failing: 800 bytes of audio were replayed to it already, and another replay would exceed 4 times the audio sent',
    });
  });
});
