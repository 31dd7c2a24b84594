// An upstream that stops transcribing while its socket stays healthy (it answers pings, takes audio,
// even answers flush and end) is replaced within STALL_SPEECH_SECONDS of speech plus 5 s: every final
// after it arrives, none repeated, on one timeline, the session's coverage at least 99%, the stall
// counted; on /transcribe and /streams. Silence and room noise never cause a reconnection. Finals the
// upstream drops leave gaps reported with their media times; a stall no reconnection cures ends as a
// failed upstream does, with its gap reported. Real gateway, the emulator's transcript faults, the
// fixture's speech encoded by libopus as Chromium does (CELT, 60 ms, 128 kb/s).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import {
  encode,
  ENCODINGS,
  fixtureSpeech,
  noise,
  silence,
  utterance,
  writeWav,
  type Clip,
} from '../audio/speech/labelled.js';
import { metric } from '../support/metrics.js';
import { endpointPath, openClient, startStack, type Stack, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const STALL_S = 10;
const dir = mkdtempSync(join(tmpdir(), 'sgw-stalls-'));
const webm = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const streamsConfig = {
  transcription: { primaryLanguage: 'en' },
  mode: { type: 'transcription' },
  audioFormat: 'audio/webm;codecs=opus',
};
const INTERACTION = '0b7c2b7a-9d4e-4c1a-8b2f-6e5d4c3b2a12';

async function webmOf(clip: Clip, name: string): Promise<Buffer> {
  const wav = join(dir, `${name}.wav`);
  writeWav(clip, wav);
  return encode(wav, ENCODINGS[0], join(dir, `${name}.webm`));
}

/** Clips end to end. */
function joined(name: string, ...clips: Clip[]): Clip {
  const samples = new Float32Array(clips.reduce((n, c) => n + c.samples.length, 0));
  let at = 0;
  for (const c of clips) {
    samples.set(c.samples, at);
    at += c.samples.length;
  }
  return { name, kind: 'speech', samples, speech: [] };
}

type Notice = {
  id: string;
  details: string;
  coverage?: {
    speechSeconds: number;
    transcribedSpeechSeconds: number;
    gaps: Array<{ start: number; end: number; speechSeconds: number }>;
  };
};
const notices = (c: TestClient): Notice[] =>
  c.messages.filter((m) => m.type === 'notice').map((m) => m.notice as Notice);

/** A session with notices: the config, all of `audio` at once (the gateway paces it), `end`, its end message. */
async function runSession(
  stack: Stack,
  endpoint: 'transcribe' | 'streams',
  configuration: object,
  audio: Buffer,
  timeoutMs = 60_000,
  /** ms between 4000-byte pieces (a live client); 0: all at once */
  everyMs = 0,
): Promise<TestClient> {
  const token = await stack.token(endpoint === 'transcribe' ? 'openid transcribe' : 'openid streams');
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}`, notices: 'true' });
  const c = await openClient(`${stack.base}${endpointPath(endpoint, INTERACTION)}?${q}`);
  c.sendJson({ type: 'config', configuration });
  await c.next('CONFIG_ACCEPTED');
  for (let at = 0; at < audio.length && c.ws.readyState === c.ws.OPEN; at += 4000) {
    c.send(audio.subarray(at, at + 4000));
    if (everyMs > 0) await delay(everyMs);
  }
  if (c.ws.readyState === c.ws.OPEN) c.sendJson({ type: 'end' });
  await c.next(endpoint === 'transcribe' ? 'ended' : 'ENDED', timeoutMs).catch(() => undefined);
  return c;
}

type Session = (
  endpoint: 'transcribe' | 'streams',
  configuration: object,
  audio: Buffer,
  timeoutMs?: number,
  everyMs?: number,
) => Promise<TestClient>;

const stallsOn = (stack: Stack) =>
  metric(stack.gateway.server.adminPort, 'speech_gateway_upstream_failures_total{cause="stalled"}');

describe('an upstream that stops transcribing', () => {
  let stack: Stack;
  let speech: Buffer;
  beforeAll(async () => {
    // Three reconnection attempts an incident: a stall that every new upstream session repeats runs
    // the budget out within the test's speech. Near real time (the emulator's own limit, 1.5x): the
    // watch gives the recogniser 2 s of wall time to answer what it was sent.
    stack = await startStack({ PACE: '1.5', STALL_SPEECH_SECONDS: String(STALL_S), UPSTREAM_RECONNECT_ATTEMPTS: '3' });
    speech = await webmOf(await fixtureSpeech(), 'speech');
  }, 60_000);
  afterEach(() => stack.emulator.resetFaults());
  afterAll(() => stack?.close());

  const session: Session = (...a) => runSession(stack, ...a);

  const stalls = () => stallsOn(stack);

  function assertOneTimeline(c: TestClient, until: number): void {
    const all = finals(c.messages);
    assert.ok(all.length > 0 && all[0].start < 1e-6, `from 0: ${JSON.stringify(all.slice(0, 3))}`);
    // A replay starts at the Opus packet that holds the last final's end: its first final may overlap
    // that one by less than a packet (60 ms), and never leaves a hole.
    for (let k = 1; k < all.length; k++)
      assert.ok(
        all[k].start <= all[k - 1].end + 1e-6 && all[k].start > all[k - 1].end - 0.06,
        `final ${k} follows ${k - 1} once: ${JSON.stringify(all)}`,
      );
    assert.ok(all.at(-1)!.end > until, `to the end: ${all.at(-1)!.end}`);
  }

  for (const [endpoint, configuration] of [
    ['transcribe', { ...webm, interimResults: true }],
    ['streams', streamsConfig],
  ] as const)
    it(`on /${endpoint}: replaced within the threshold plus 5 s of speech; every final after it once, on one timeline; coverage ≥ 99%; counted`, async () => {
      const before = await stalls();
      stack.emulator.faults.stopTranscribing = { afterMediaSeconds: 5, sessions: 1 };
      const c = await session(endpoint, configuration, speech);
      assert.equal(stack.emulator.faultCounts.stoppedSessions, 1, 'the first upstream session stopped');
      assert.equal((await stalls()) - before, 1, 'one stall counted');
      const ids = notices(c).map((n) => n.id);
      assert.ok(ids.includes('TRANSCRIPTION_STALLED'), ids.join());
      const recovered = notices(c).find((n) => n.id === 'TRANSCRIPTION_RECOVERED');
      assert.ok(recovered, ids.join());
      const [, , to] = /\(([\d.]+)-([\d.]+) s\)/.exec(recovered.details)!.map(Number);
      assert.ok(to - 5 <= STALL_S + 5, `replaced once ${to} s of media had gone upstream (stopped at 5 s)`);
      assertOneTimeline(c, 25);
      const cov = notices(c).find((n) => n.id === 'TRANSCRIPT_COVERAGE')!.coverage!;
      assert.ok(cov.transcribedSpeechSeconds / cov.speechSeconds >= 0.99, JSON.stringify(cov));
      assert.ok(cov.speechSeconds > 20, `the fixture's speech: ${cov.speechSeconds} s`);
    }, 90_000);

  it('finals dropped over a stretch: the gap is reported with its media times, to the client and at the end', async () => {
    stack.emulator.faults.dropFinals = { ranges: [[8, 12]] };
    const c = await session('transcribe', webm, speech);
    const gap = notices(c).find((n) => n.id === 'TRANSCRIPTION_GAP');
    assert.ok(
      gap,
      notices(c)
        .map((n) => n.id)
        .join(),
    );
    const cov = notices(c).find((n) => n.id === 'TRANSCRIPT_COVERAGE')!.coverage!;
    assert.equal(cov.gaps.length, 1, JSON.stringify(cov));
    assert.ok(
      cov.gaps[0].start >= 7.9 && cov.gaps[0].end <= 12.1 && cov.gaps[0].speechSeconds >= 2,
      JSON.stringify(cov.gaps),
    );
    assert.ok(cov.transcribedSpeechSeconds < cov.speechSeconds - 2);
  }, 90_000);

  it("a stall no reconnection cures: the client gets the failed upstream's error, and the gap is reported", async () => {
    const untranscribed = () =>
      metric(stack.gateway.server.adminPort, 'speech_gateway_untranscribed_speech_seconds_total');
    const missed = await untranscribed();
    stack.emulator.faults.stopTranscribing = { afterMediaSeconds: 0 }; // every upstream session, from its start
    const words = await fixtureSpeech();
    const long = await webmOf(joined('speech x3', words, words, words), 'speech-x3');
    // As a live client sends (a piece of 0.25 s every 160 ms at PACE 1.5): new speech keeps going upstream.
    const c = await session('transcribe', { ...webm, interimResults: true }, long, 90_000, 160);
    const error = c.messages.find((m) => m.type === 'error');
    assert.ok(error, c.types().join());
    assert.equal(error.error.id, 'UPSTREAM_UNAVAILABLE');
    assert.match(error.error.details, /no transcript/);
    const closed = await c.closed;
    assert.notEqual(closed.code, 1000);
    assert.ok(notices(c).some((n) => n.id === 'TRANSCRIPTION_STALLED'));
    assert.ok((await untranscribed()) - missed > STALL_S, 'its untranscribed speech counted');
  }, 120_000);

  it('a 30 s utterance without a pause from a client that asked for no interim results: no stall, and no interim reaches it', async () => {
    const before = await stalls();
    const audio = await webmOf(await utterance(30), 'utterance-30');
    const c = await session('transcribe', webm, audio);
    assert.equal((await stalls()) - before, 0, 'no stall');
    const transcripts = c.messages.filter((m) => m.type === 'transcript');
    assert.ok(transcripts.length >= 29, `finals: ${transcripts.length}`);
    assert.ok(
      transcripts.every((m) => m.data.isFinal === true),
      'the interim results the gateway asked for stay with it',
    );
    const accepted = c.messages.find((m) => m.type === 'CONFIG_ACCEPTED');
    assert.equal(accepted?.configuration?.interimResults, undefined, 'its config as it sent it');
  }, 90_000);
});

describe('long stretches without speech', () => {
  let stack: Stack;
  beforeAll(async () => {
    // Ten minutes of 128 kb/s Opus sent at once: more than the default 8 MiB waits for pacing.
    stack = await startStack({
      PACE: '50',
      STALL_SPEECH_SECONDS: String(STALL_S),
      MAX_BUFFERED_AUDIO_BYTES: String(64 * 1024 * 1024),
    });
  }, 60_000);
  afterAll(() => stack?.close());
  const stalls = () => stallsOn(stack);
  const session: Session = (...a) => runSession(stack, ...a);

  for (const [what, quiet] of [
    ['silence', () => silence(600)],
    ['room noise (pink, -35 dBFS)', () => noise('pink', -35, 600)],
  ] as const)
    it(`ten minutes of ${what} inside a dictation: no reconnection, coverage 100%`, async () => {
      const before = await stalls();
      const reconnects = await metric(stack.gateway.server.adminPort, 'speech_gateway_upstream_reconnects_total');
      const words = await fixtureSpeech();
      const audio = await webmOf(joined(what, words, quiet(), words), what.replace(/\W+/g, '-'));
      const c = await session('transcribe', webm, audio, 120_000);
      assert.equal((await stalls()) - before, 0, 'no stall');
      assert.equal(
        await metric(stack.gateway.server.adminPort, 'speech_gateway_upstream_reconnects_total'),
        reconnects,
      );
      const cov = notices(c).find((n) => n.id === 'TRANSCRIPT_COVERAGE')!.coverage!;
      assert.equal(cov.transcribedSpeechSeconds, cov.speechSeconds, JSON.stringify(cov));
      assert.ok(
        cov.speechSeconds > 40 && cov.speechSeconds < 60,
        `both dictations, nothing of the ${what}: ${cov.speechSeconds} s`,
      );
    }, 150_000);
});
