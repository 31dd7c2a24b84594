// The emulator's transcript faults, each as the real service would look failing that way, over real
// sockets: a recogniser that silently stops (socket healthy, pings answered, audio taken, flushed
// and usage sent, no transcript), one that loses the finals of some stretches, one that answers
// interim results and never finalises; scoped to the first sessions or to all, and counted.
import assert from 'node:assert/strict';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { evenChunks, fixture } from '../support/fixtures.js';
import { finals } from '../support/transcripts.js';
import { until } from '../support/wait.js';
import { connect, openTranscribe, sendAllAndEnd, streamsUrl, type Client } from './ws-client.js';

const webm = fixture('dictation.webm'); // 25.9 s of speech: 26 finals when nothing fails
const frames = evenChunks(webm, 1000); // about 0.25 s each, so interims come at every quarter second
const FIRST = Math.floor(frames.length * 0.4); // about 10 s
const WHOLE = Array.from({ length: 26 }, (_, n) => n);
const COMMAND = { commands: [{ id: 'next-section', phrases: ['next section'] }] };

const windows = (c: Client) => finals(c.messages).map((f) => Math.floor(f.start));
const interims = (c: Client) => c.messages.filter((m) => m.type === 'transcript' && !m.data.isFinal).map((m) => m.data);
const others = (c: Client) => c.messages.map((m) => m.type).filter((t) => t !== 'transcript');
const pong = (c: Client) =>
  new Promise<void>((resolve) => {
    c.ws.once('pong', () => resolve());
    c.ws.ping();
  });

describe('emulator transcript faults', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator();
  });
  afterEach(() => em.resetFaults());
  afterAll(() => em.close());

  it('stopTranscribing from 5 s for one session: nothing transcribed past 5 s, all else as usual; the next session transcribes', async () => {
    em.faults.stopTranscribing = { afterMediaSeconds: 5, sessions: 1 };
    const stalled = await openTranscribe(em, { interimResults: true, ...COMMAND });
    frames.forEach((f) => stalled.ws.send(f));
    stalled.sendJson({ type: 'flush' });
    await stalled.next((m) => m.type === 'delta_usage');
    await pong(stalled); // the socket is healthy: pings answered after the stop
    stalled.sendJson({ type: 'end' });
    assert.equal((await stalled.closed).code, 1000);

    assert.deepEqual(windows(stalled), [0, 1, 2, 3, 4]);
    assert.ok(interims(stalled).length > 0);
    assert.deepEqual(
      interims(stalled).filter((d) => d.end > 5),
      [],
    );
    assert.deepEqual(others(stalled), ['CONFIG_ACCEPTED', 'command', 'flushed', 'delta_usage', 'usage', 'ended']);
    assert.equal(stalled.messages.find((m) => m.type === 'usage').credits, 2.59); // all its audio taken
    const record = em.sessions.at(-1)!;
    assert.equal(record.mediaSeconds, 25.9);
    assert.equal(record.stoppedTranscribingAt, 5);
    assert.ok(record.withheldTranscripts >= 21);

    const replacement = await openTranscribe(em);
    await sendAllAndEnd(replacement, frames);
    assert.deepEqual(windows(replacement), WHOLE);
    assert.equal(em.sessions.at(-1)!.stoppedTranscribingAt, undefined);
    assert.equal(em.faultCounts.stoppedSessions, 1);
  });

  it('stopTranscribing for all, switched on mid-session: the live session stops from its media then, new ones from their start, until switched off', async () => {
    const live = await openTranscribe(em);
    frames.slice(0, FIRST).forEach((f) => live.ws.send(f));
    await until(() => em.sessions.at(-1)!.frames.length === FIRST, 'the first frames at the emulator');
    const at = em.sessions.at(-1)!.mediaSeconds;
    em.faults.stopTranscribing = {};
    const next = await openTranscribe(em); // CONFIG_ACCEPTED still comes
    await sendAllAndEnd(live, frames.slice(FIRST));
    await sendAllAndEnd(next, frames);

    assert.deepEqual(windows(live), WHOLE.slice(0, Math.floor(at)));
    assert.equal(em.sessions.at(-2)!.stoppedTranscribingAt, at);
    assert.deepEqual(windows(next), []);
    assert.deepEqual(others(next), ['CONFIG_ACCEPTED', 'usage', 'ended']);
    assert.equal(em.sessions.at(-1)!.stoppedTranscribingAt, 0);
    assert.equal(em.faultCounts.stoppedSessions, 2);

    em.faults.stopTranscribing = null;
    const after = await openTranscribe(em);
    await sendAllAndEnd(after, frames);
    assert.deepEqual(windows(after), WHOLE);
    assert.equal(em.faultCounts.stoppedSessions, 2, 'switching off keeps the counts');
  });

  it('stopTranscribing on /streams: no transcripts, facts (media-time marks) and ENDED still come', async () => {
    em.faults.stopTranscribing = {};
    const token = await em.issueToken({ tenant: 'base', scope: 'openid streams' });
    const c = await connect(streamsUrl(em.wsBase, 'base', token));
    c.sendJson({
      type: 'config',
      configuration: {
        transcription: { primaryLanguage: 'en' },
        mode: { type: 'facts', outputLocale: 'en', factGenerationInterval: 'fast_init' },
      },
    });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    await sendAllAndEnd(c, frames);
    assert.deepEqual(others(c), ['CONFIG_ACCEPTED', 'facts', 'facts', 'facts', 'usage', 'ENDED']);
    assert.equal(finals(c.messages).length, 0);
  });

  it('dropFinals: the finals of segments overlapping the ranges are never sent, their interims are', async () => {
    em.faults.dropFinals = {
      ranges: [
        [5, 8],
        [12.5, 12.6],
      ],
    };
    const c = await openTranscribe(em, { interimResults: true });
    await sendAllAndEnd(c, frames);
    assert.deepEqual(
      windows(c),
      WHOLE.filter((n) => ![5, 6, 7, 12].includes(n)),
    );
    assert.ok(interims(c).some((d) => d.start === 6));
    assert.match(finals(c.messages)[5].text, /segment 8 \(8\.00-9\.00 s\)/); // numbered as made
    assert.equal(em.faultCounts.droppedFinals, 4);
    assert.equal(em.sessions.at(-1)!.withheldTranscripts, 4);
  });

  it('interimsOnly: interim results throughout, never a final (nor the command a final carries)', async () => {
    em.faults.interimsOnly = { sessions: 1 };
    const c = await openTranscribe(em, { interimResults: true, ...COMMAND });
    frames.forEach((f) => c.ws.send(f));
    c.sendJson({ type: 'flush' });
    c.sendJson({ type: 'end' });
    await c.closed;
    assert.deepEqual(windows(c), []);
    const heard = interims(c);
    assert.ok(heard.some((d) => d.start === 0) && heard.some((d) => d.start === 25), 'interims from start to end');
    assert.deepEqual(others(c), ['CONFIG_ACCEPTED', 'flushed', 'delta_usage', 'usage', 'ended']);
    assert.deepEqual(em.faultCounts, {
      stoppedSessions: 0,
      interimsOnlySessions: 1,
      withheldFinals: 26,
      droppedFinals: 0,
    });

    const second = await openTranscribe(em);
    await sendAllAndEnd(second, frames);
    assert.deepEqual(windows(second), WHOLE, 'sessions: 1 reaches only the first');
  });

  it('counts start from zero when a fault is switched on anew and at resetFaults(); a malformed fault is refused', async () => {
    em.faults.dropFinals = { ranges: [[0, 1]] };
    await sendAllAndEnd(await openTranscribe(em), frames);
    assert.equal(em.faultCounts.droppedFinals, 1);
    em.faults.dropFinals = { ranges: [[1, 3]] };
    assert.equal(em.faultCounts.droppedFinals, 0);
    em.resetFaults();
    assert.equal(em.faults.dropFinals, null);
    await sendAllAndEnd(await openTranscribe(em), frames);
    assert.equal(em.faultCounts.droppedFinals, 0);
    assert.throws(() => (em.faults.stopTranscribing = { sessions: -1 }), TypeError);
    assert.throws(() => (em.faults.dropFinals = { ranges: [[3, 1]] }), TypeError);
    assert.equal(em.faults.stopTranscribing, null, 'a refused value is not kept');
  });
});
