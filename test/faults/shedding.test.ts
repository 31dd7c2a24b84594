// Backpressure toward a slow client: while its unread backlog is high, interim transcripts are
// shed; final transcripts, commands, usage and the end message never are. The client socket is a
// sink reporting the backlog the test sets (test/support/session-harness.ts); all else is real.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { startHarness, type Harness } from '../support/session-harness.js';
import { delay } from '../support/wait.js';

const ogg = fixture('dictation.ogg');

describe('a client falling behind', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  async function dictate(backlog: () => number) {
    const got: Array<Record<string, any>> = [];
    const { session, finished, text } = await h.open({
      sendText: (t) => (got.push(JSON.parse(String(t))), true),
      close: () => undefined,
      backlog,
      undelivered: () => [],
    });
    text({ type: 'config', configuration: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/ogg' } });
    while (!got.some((m) => m.type === 'CONFIG_ACCEPTED')) await delay(10);
    for (let off = 0; off < ogg.length; off += 8000) {
      const chunk = ogg.subarray(off, off + 8000);
      session.onClientBinary(chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.length) as ArrayBuffer);
    }
    text({ type: 'end' });
    await finished;
    return got;
  }

  const transcripts = (got: Array<Record<string, any>>, final: boolean) =>
    got.filter((m) => m.type === 'transcript' && m.data.isFinal === final);

  it('keeps every interim transcript while it keeps up', async () => {
    const got = await dictate(() => 0);
    assert.ok(transcripts(got, false).length > 0, 'interims arrive');
  });

  it('loses interim transcripts, never a final one, usage or the end, while behind', async () => {
    const got = await dictate(() => 200 * 1024);
    assert.equal(transcripts(got, false).length, 0, 'interims are shed');
    const finals = transcripts(got, true).map((m) => m.data);
    for (let i = 1; i < finals.length; i++)
      assert.equal(finals[i].start, finals[i - 1].end, `final ${i} follows ${i - 1}`);
    assert.ok(finals.at(-1).end > 25, 'the finals cover the whole dictation');
    assert.deepEqual(
      got.slice(-2).map((m) => m.type),
      ['usage', 'ended'],
    );
  });
});
