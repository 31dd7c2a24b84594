// A session's transcript coverage: speech seconds, the part final transcripts cover, and the gaps
// (uncovered speech of 2 s or more), on one timeline, bounded however long the session runs.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { Coverage } from '../../src/session/coverage.js';

describe('transcript coverage', () => {
  it('speech every final covers is covered whole; silence between is neither', () => {
    const c = new Coverage();
    c.speech(0, 4);
    c.speech(10, 14); // 6 s of silence between
    c.final(0, 4);
    c.final(10, 14);
    assert.deepEqual(c.figures(), { speechSeconds: 8, coveredSeconds: 8, gaps: [], moreGaps: 0 });
  });

  it('speech without finals is a gap once it holds 2 s of speech, joined across the silences inside it', () => {
    const c = new Coverage();
    c.speech(0, 3);
    c.final(0, 3);
    c.speech(3.5, 4.5); // 1 s, then a pause, then 1.5 s: one gap of 2.5 s of speech
    c.speech(6, 7.5);
    c.speech(8, 8.5); // then a final: what follows it is another stretch
    c.final(8, 8.5);
    c.speech(9, 10); // 1 s uncovered: not a gap
    c.final(11, 12);
    const f = c.figures();
    assert.equal(f.speechSeconds, 7);
    assert.equal(f.coveredSeconds, 3.5);
    assert.deepEqual(f.gaps, [{ start: 3.5, end: 7.5, speechSeconds: 2.5 }]);
  });

  it('finals that arrive out of order or overlap merge; a final over silence adds no speech', () => {
    const c = new Coverage();
    c.speech(0, 10);
    c.final(5, 10);
    c.final(0, 3);
    c.final(2.5, 5.2);
    c.final(20, 30);
    assert.deepEqual(c.figures(), { speechSeconds: 10, coveredSeconds: 10, gaps: [], moreGaps: 0 });
  });

  it('stays bounded over a long session, and its totals and gaps survive the folding and a restore', () => {
    const c = new Coverage();
    let t = 0;
    for (let i = 0; i < 5000; i++) {
      c.speech(t, t + 1);
      if (i % 100 !== 50) c.final(t, t + 1);
      else c.speech(t + 1.2, t + 3.2); // a gap of 3 s of speech every 100 stretches
      t += i % 100 === 50 ? 4 : 1.5;
    }
    const f = c.figures();
    assert.equal(f.speechSeconds, 5000 + 50 * 2);
    assert.equal(f.coveredSeconds, 5000 - 50);
    assert.equal(f.gaps.length + f.moreGaps, 50);
    assert.ok(f.gaps.every((g) => g.speechSeconds === 3));
    const s = c.state();
    assert.ok(s.s.length < 2 * 2048 && s.f.length < 2 * 2048, 'intervals bounded');
    assert.ok(JSON.stringify(s).length < 64 * 1024, `a record's share stays small: ${JSON.stringify(s).length} bytes`);
    const again = new Coverage();
    again.restore(JSON.parse(JSON.stringify(s)));
    assert.deepEqual(again.figures(), f);
  });

  it('speech known long before its finals (a client sending ahead of pacing) is not folded before they come', () => {
    const c = new Coverage();
    c.speech(0, 25);
    c.speech(626, 651); // ten minutes of silence between, all parsed at once
    for (let t = 0; t < 26; t++) c.final(t, t + 1);
    for (let t = 626; t < 651; t++) c.final(t, t + 1);
    assert.deepEqual(c.figures(), { speechSeconds: 50, coveredSeconds: 50, gaps: [], moreGaps: 0 });
  });

  it('a restored state with values that are not numbers is ignored', () => {
    const c = new Coverage();
    c.restore({ horizon: -1, speech: 1, covered: 1, gaps: [], moreGaps: 0, s: [], f: [] });
    c.restore({ horizon: 0, speech: Number.NaN, covered: 1, gaps: [], moreGaps: 0, s: [], f: [] });
    assert.deepEqual(c.figures(), { speechSeconds: 0, coveredSeconds: 0, gaps: [], moreGaps: 0 });
  });

  it('uncovered speech since a time: what a stall watch reads', () => {
    const c = new Coverage();
    c.speech(0, 20);
    c.final(0, 6);
    assert.equal(c.uncoveredSince(0), 14);
    assert.equal(c.uncoveredSince(10), 10);
  });
});
