// The session_ended audit event carries the session's speech figures: the speech it forwarded, the
// part final transcripts cover, how many gaps and how much speech they hold. Figures only: never
// where in the stream a gap lies, nor anything said. A session that never went live, or one another
// replica took over (its figures come with its end there), carries none.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAudit, type AuditTrail } from '../../src/audit/index.js';
import type { LifecycleEvent } from '../../src/session/index.js';
import { logger } from '../../src/telemetry/index.js';

type Ended = Extract<LifecycleEvent, { type: 'ended' }>;
const info = (sessionKey: string) => ({
  sessionKey,
  endpoint: 'transcribe' as const,
  tenant: 'acme',
  environment: 'eu',
  clientToken: 'Bearer not-in-the-trail',
});
const ended = (over: Partial<Ended>): Ended => ({
  type: 'ended',
  outcome: 'ended',
  owned: true,
  live: true,
  mediaSeconds: 120,
  credits: 2,
  estimated: false,
  durationSeconds: 121,
  at: Date.now(),
  ...over,
});

describe('session_ended in the audit trail', () => {
  let file: string;
  let trail: AuditTrail;
  beforeAll(async () => {
    file = join(mkdtempSync(join(tmpdir(), 'sg-audit-cov-')), 'audit.jsonl');
    trail = await createAudit({ file, retentionDays: 1, trustedProxies: 0, logger });
  });
  afterAll(() => trail?.close());

  /** The session_ended line of session `key`, once the session `info` describes ends with `e`. */
  async function endedLine(key: string, e: Ended): Promise<Record<string, unknown>> {
    trail.attach(info(key), (listener) => listener(e));
    await trail.flush();
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    const found = lines.map((l) => JSON.parse(l)).filter((l) => l.sessionId === key && l.event === 'session_ended');
    assert.equal(found.length, 1, `one session_ended for ${key}`);
    return found[0];
  }

  it('holds speech, transcribed speech, the number of gaps and the speech in them', async () => {
    const e = await endedLine(
      'with-gaps',
      ended({
        coverage: {
          speechSeconds: 95.5,
          coveredSeconds: 80.25,
          gaps: [
            { start: 10, end: 14, speechSeconds: 3.5 },
            { start: 40.5, end: 52, speechSeconds: 10.25 },
          ],
          moreGaps: 3,
        },
      }),
    );
    assert.deepEqual(
      [e.speechSeconds, e.transcribedSpeechSeconds, e.gaps, e.gapSeconds, e.mediaSeconds],
      [95.5, 80.25, 5, 13.75, 120],
    );
    // Figures only: no gap's place in the stream, no list, nothing of the client's token.
    for (const v of Object.values(e)) assert.notEqual(typeof v, 'object');
    const text = JSON.stringify(e);
    for (const s of ['"start"', '"end"', 'not-in-the-trail']) assert.ok(!text.includes(s), s);
    // Where the gaps lie (40.5-52, 10-14 s) is in no field (the time and ids may hold any digits).
    const figures = Object.entries(e).filter(([k]) => !['time', 'session', 'resumeKeyHash'].includes(k));
    for (const [k, v] of figures) assert.ok(![40.5, 52, 10, 14].includes(v as number), `${k}: ${String(v)}`);
  });

  it('a session with all its speech transcribed: no gaps', async () => {
    const e = await endedLine(
      'covered',
      ended({ coverage: { speechSeconds: 30, coveredSeconds: 30, gaps: [], moreGaps: 0 } }),
    );
    assert.deepEqual([e.speechSeconds, e.transcribedSpeechSeconds, e.gaps, e.gapSeconds], [30, 30, 0, 0]);
  });

  it('none for a session that never went live, nor for one another replica took over', async () => {
    const coverage = { speechSeconds: 30, coveredSeconds: 10, gaps: [], moreGaps: 0 };
    for (const [key, e] of [
      ['refused', ended({ live: false, outcome: 'config_rejected' })],
      ['disowned', ended({ owned: false, coverage })],
    ] as const) {
      const line = await endedLine(key, e);
      for (const f of ['speechSeconds', 'transcribedSpeechSeconds', 'gaps', 'gapSeconds'])
        assert.equal(line[f], undefined, `${key}: ${f}`);
    }
  });
});
