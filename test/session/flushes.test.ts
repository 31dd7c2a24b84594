// The flush gate alone: which client flushes send a flush upstream, which join one already pending,
// and how the upstream's one answer becomes one answer per client flush, in order.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { FlushGate, MAX_UNANSWERED_FLUSHES } from '../../src/session/flushes.js';

function gate() {
  const log: string[] = [];
  const g = new FlushGate({
    sendUpstream: () => log.push('upstream'),
    answer: () => log.push('answer'),
    refuse: () => log.push('refuse'),
  });
  /** the upstream answers its oldest flush: flushed, then delta_usage */
  const answer = () => {
    g.relayed('flushed');
    g.relayed('delta_usage');
  };
  return { g, log, answer };
}

describe('FlushGate', () => {
  it('flushes with no audio between them share one upstream flush; the others are answered after its delta_usage', () => {
    const { g, log, answer } = gate();
    for (let i = 0; i < 5; i++) g.ask();
    assert.deepEqual(log, ['upstream']);
    answer();
    assert.deepEqual(log, ['upstream', 'answer', 'answer', 'answer', 'answer']);
  });

  it('a flush after audio waits for the pending answer, then goes upstream behind that audio', () => {
    const { g, log, answer } = gate();
    g.ask();
    g.audio();
    g.ask();
    g.ask(); // joins the waiting one
    assert.deepEqual(log, ['upstream']);
    g.relayed('flushed');
    assert.deepEqual(log, ['upstream', 'upstream'], 'the next flush is sent once the first is answered');
    g.relayed('delta_usage');
    answer();
    assert.deepEqual(log, ['upstream', 'upstream', 'answer']);
  });

  it('end sends a waiting flush first, and the answers still come in order', () => {
    const { g, log, answer } = gate();
    g.ask();
    g.audio();
    g.ask();
    g.beforeEnd();
    assert.deepEqual(log, ['upstream', 'upstream']);
    answer();
    answer();
    assert.deepEqual(log, ['upstream', 'upstream'], 'one client flush each: nothing to add');
  });

  it('past the bound a flush is refused, told once until the next answer', () => {
    const { g, log, answer } = gate();
    for (let i = 0; i < MAX_UNANSWERED_FLUSHES + 50; i++) g.ask();
    assert.deepEqual(log, ['upstream', 'refuse']);
    answer();
    assert.equal(log.filter((l) => l === 'answer').length, MAX_UNANSWERED_FLUSHES - 1);
    g.ask();
    g.ask();
    for (let i = 0; i < MAX_UNANSWERED_FLUSHES; i++) g.ask();
    assert.deepEqual(log.slice(-2), ['upstream', 'refuse']);
  });

  it('a flushed without its delta_usage is settled by the next message', () => {
    const { g, log } = gate();
    g.ask();
    g.ask();
    g.relayed('flushed');
    g.relayed('transcript');
    assert.deepEqual(log, ['upstream', 'answer']);
  });
});
