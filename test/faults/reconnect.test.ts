// Chaos: the upstream is lost mid-dictation, many sessions at once. The gateway replaces it
// without telling the client: same config, the audio no final covers yet replayed from a
// container boundary, times moved onto the client's timeline, finals it already has not sent
// again, usage summed over the upstream sessions. Real sockets: ws clients → uWS gateway → emulator.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';
import { configured, englishConfiguration, startStack, type Stack, type TestClient } from '../support/stack.js';
import { finals, type Final } from '../support/transcripts.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const API = 'test-usage-token';
const ogg = fixture('dictation.ogg'); // ~26 s
const webm = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk

/** One increasing timeline: each final ends after the one before, starts no earlier, no gap. */
function assertOneTimeline(f: Final[], until: number, label: string) {
  assert.ok(f.length > 0, `${label}: finals arrived`);
  assert.ok(f[0].start < 0.01, `${label}: the timeline starts at 0`);
  for (let i = 1; i < f.length; i++) {
    assert.ok(
      f[i].end > f[i - 1].end,
      `${label}: final ${i} (${f[i].start}-${f[i].end}) ends after final ${i - 1} (${f[i - 1].start}-${f[i - 1].end})`,
    );
    assert.ok(
      f[i].start >= f[i - 1].start && f[i].start <= f[i - 1].end + 0.01,
      `${label}: final ${i} starts within or right after final ${i - 1} (no gap, no going back)`,
    );
  }
  assert.ok(f.at(-1)!.end > until, `${label}: the finals cover the audio (last ends at ${f.at(-1)!.end})`);
}

async function session(stack: Stack, endpoint: 'transcribe' | 'streams', audioFormat: string): Promise<TestClient> {
  const c = await stack.connect(endpoint);
  await configured(c, englishConfiguration(endpoint, audioFormat));
  return c;
}

async function stream(c: TestClient, chunks: Buffer[], everyMs: number) {
  for (const chunk of chunks) {
    if (c.ws.readyState !== c.ws.OPEN) return;
    c.send(chunk);
    await delay(everyMs);
  }
}

describe('the upstream lost mid-session, many sessions at once', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '4', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('killed twice mid-stream (no close frame, then going away 1012): every final once, one timeline, no error, usage summed', async () => {
    const clients = await Promise.all([
      ...Array.from({ length: 3 }, () => session(stack, 'transcribe', 'audio/ogg')),
      ...Array.from({ length: 3 }, () => session(stack, 'streams', 'audio/webm;codecs=opus')),
    ]);
    const streaming = clients.map((c, i) => (i < 3 ? stream(c, evenChunks(ogg, 8000), 60) : stream(c, webm, 60)));
    await delay(700);
    stack.emulator.dropAllSessions(); // a crash: TCP gone, no close frame
    await delay(900);
    stack.emulator.dropAllSessions(1012); // an upstream restarting
    await Promise.all(streaming);
    for (const c of clients) c.sendJson({ type: 'end' });
    await Promise.all(clients.map((c, i) => c.next(i < 3 ? 'ended' : 'ENDED', 30_000)));

    for (const [i, c] of clients.entries()) {
      const label = `session ${i}`;
      assert.deepEqual(
        c.messages.filter((m) => m.type === 'error'),
        [],
        `${label}: the client was not told of a failure`,
      );
      assert.equal((await c.closed).code, 1000);
      assertOneTimeline(finals(c.messages), i < 3 ? 25 : 7, label);
      assert.equal(c.types().at(-2), 'usage', `${label}: usage, then the end message`);
    }

    // Each gateway session used several upstream sessions; its usage is their sum.
    const rows = await endedLedgerSessions(stack, API);
    const upstreamFinal = new Map(
      stack.emulator.sessions.map((s) => [
        s.sessionId,
        (s.sent as Array<{ type: string; credits?: number }>).find((m) => m.type === 'usage')?.credits,
      ]),
    );
    const reconnected = rows.filter((r) => (r as unknown as { segments: unknown[] }).segments.length >= 2);
    assert.ok(
      reconnected.length >= clients.length,
      `every session has several upstream segments (${reconnected.length})`,
    );
    for (const r of reconnected) {
      const segments = (r as unknown as { segments: Array<{ upstreamSessionId: string; credits: number }> }).segments;
      const last = segments.at(-1)!;
      assert.ok(
        Math.abs(last.credits - (upstreamFinal.get(last.upstreamSessionId) ?? -1)) < 1e-6,
        'the last segment has the final figure its upstream session reported',
      );
      assert.ok(
        Math.abs(r.credits - segments.reduce((t, s) => t + s.credits, 0)) < 1e-6,
        'the session credits are the sum of its segments',
      );
    }
  });
});
