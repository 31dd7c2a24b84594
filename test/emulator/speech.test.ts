// The emulator gives silence no segments, as a recogniser does: its one-second windows get a final
// only where the gateway's speech detector hears speech in the Opus it received. The streams are
// made here with ffmpeg from the fixture's speech, encoded as Chromium records (libopus CELT, 60 ms
// packets, 128 kb/s, WebM), and sent over a real socket. Media the detector cannot judge (MP3)
// still gets a segment for every second.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import assert from 'node:assert/strict';
import prism from 'prism-media';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { SpeechDetector } from '../../src/audio/index.js';
import { opusPacketSeconds, startEmulator, type Emulator } from '../../src/emulator/index.js';
import { chromeChunks, evenChunks, fixture, FIXTURES } from '../support/fixtures.js';
import { finals, type Final } from '../support/transcripts.js';
import { openTranscribe, sendAllAndEnd } from './ws-client.js';

const run = promisify(execFile);
const WAV = join(FIXTURES, 'dictation-16k.wav');
/** The fixture's length in seconds (16 kHz s16 mono after a 44-byte header). */
const SPEECH_SECONDS = (fixture('dictation-16k.wav').length - 44) / 32000;
const SILENCE = 20;
const CHROMIUM_OPUS = [
  '-ar',
  '48000',
  '-c:a',
  'libopus',
  '-application',
  'audio',
  '-frame_duration',
  '60',
  '-b:a',
  '128k',
];

/** ffmpeg's output of a filter graph over the fixture's speech (inputs [0:a], [1:a]). */
async function make(graph: string, inputs: number, codec: string[], format: string): Promise<Buffer> {
  const args = ['-v', 'error', ...Array.from({ length: inputs }, () => ['-i', WAV]).flat()];
  args.push('-filter_complex', `${graph}[out]`, '-map', '[out]', '-ac', '1', ...codec, '-f', format, 'pipe:1');
  const { stdout } = await run('ffmpeg', args, { encoding: 'buffer', maxBuffer: 64 << 20 });
  return stdout;
}

/** The one-second windows of a WebM/Opus stream where the gateway's detector, given all of it, hears speech. */
function speechWindows(webm: Buffer): number[] {
  const detector = new SpeechDetector();
  const demuxer = new prism.opus.WebmDemuxer();
  let t = 0;
  demuxer.push = (p: unknown) => {
    if (!Buffer.isBuffer(p)) return true;
    detector.packet(p, t, opusPacketSeconds(p));
    t += opusPacketSeconds(p);
    return true;
  };
  demuxer.write(webm);
  return Array.from({ length: Math.ceil(t) }, (_, n) => n).filter((n) => detector.speechBetween(n, n + 1) > 0);
}

/** Asserts the finals are contiguous one-second segments from `from` to `to` (the last the remainder). */
function assertTiles(fs: Final[], from: number, to: number): void {
  assert.ok(fs.length > 0, `no finals in ${from}-${to}`);
  assert.equal(fs[0].start, from);
  for (const [i, f] of fs.entries()) {
    if (i > 0) assert.equal(f.start, fs[i - 1].end, `gap or overlap before final ${i} (${f.start})`);
    if (i < fs.length - 1) assert.equal(f.end - f.start, 1, `final ${i} is ${f.start}-${f.end}`);
  }
  assert.ok(Math.abs(fs.at(-1)!.end - to) < 0.001, `ends at ${fs.at(-1)!.end}, not ${to}`);
}

describe('emulator: segments only where there is speech', () => {
  let em: Emulator;
  let gapped: Buffer; // speech, 20 s of digital silence, speech
  let trailing: Buffer; // speech, then 20 s of silence to the end
  beforeAll(async () => {
    em = await startEmulator();
    gapped = await make(`[0:a]apad=pad_dur=${SILENCE}[a];[a][1:a]concat=n=2:v=0:a=1`, 2, CHROMIUM_OPUS, 'webm');
    trailing = await make(`[0:a]apad=pad_dur=${SILENCE}`, 1, CHROMIUM_OPUS, 'webm');
  });
  afterAll(() => em.close());

  it('a long silence between two stretches of speech gets no segment, and no interim; both stretches get theirs', async () => {
    const c = await openTranscribe(em, { interimResults: true });
    await sendAllAndEnd(c, evenChunks(gapped, 512)); // less than a packet of speech: media advances packet by packet
    const media = em.sessions.at(-1)!.mediaSeconds;
    assert.ok(Math.abs(media - (2 * SPEECH_SECONDS + SILENCE)) < 0.1, `media ${media}`);
    const silence = { from: Math.ceil(SPEECH_SECONDS), to: Math.floor(SPEECH_SECONDS + SILENCE) }; // whole windows of it
    const fs = finals(c.messages);
    const before = fs.filter((f) => f.end <= silence.from);
    const after = fs.filter((f) => f.start >= silence.to);
    assert.deepEqual(
      fs.filter((f) => !before.includes(f) && !after.includes(f)),
      [],
      'no final inside the silence',
    );
    assertTiles(before, 0, silence.from);
    // The second stretch's segments start at its first window, not where the last segment ended.
    assert.ok(after[0].start === silence.to || after[0].start === silence.to + 1, `resumes at ${after[0].start}`);
    assertTiles(after, after[0].start, media);
    assert.match(after[0].text, new RegExp(`segment ${before.length} \\(${after[0].start}\\.00-`));
    // Exactly the windows where the detector, having heard the whole stream, finds speech: also one
    // whose speech starts in its last moments, before the detector's onset has passed.
    assert.deepEqual(
      fs.map((f) => Math.floor(f.start)),
      speechWindows(gapped),
    );

    const interims = c.messages.filter((m) => m.type === 'transcript' && !m.data.isFinal).map((m) => m.data);
    assert.ok(interims.some((d) => d.end < silence.from) && interims.some((d) => d.start >= silence.to));
    assert.deepEqual(
      interims.filter((d) => d.end > silence.from && d.start < silence.to),
      [],
      'no interim inside the silence',
    );
    assert.deepEqual(
      c.messages.slice(-2).map((m) => m.type),
      ['usage', 'ended'],
    );
  });

  it('silence at the end: its whole seconds get no segments; the remainder at the end, or at a flush, gets its own', async () => {
    const end = await openTranscribe(em);
    await sendAllAndEnd(end, evenChunks(trailing, 4096));
    const media = em.sessions.at(-1)!.mediaSeconds;
    assert.ok(media > SPEECH_SECONDS + SILENCE - 0.1);
    const atEnd = finals(end.messages);
    assertTiles(atEnd.slice(0, -1), 0, Math.ceil(SPEECH_SECONDS));
    assert.deepEqual([atEnd.at(-1)!.start, atEnd.at(-1)!.end], [Math.floor(media), media], 'the remainder');

    const flush = await openTranscribe(em);
    for (const f of evenChunks(trailing, 4096)) flush.ws.send(f);
    flush.sendJson({ type: 'flush' });
    await flush.next((m) => m.type === 'flushed');
    const atFlush = finals(flush.messages);
    assertTiles(atFlush.slice(0, -1), 0, Math.ceil(SPEECH_SECONDS));
    assert.equal(atFlush.at(-1)!.start, Math.floor(media), 'the remainder');
    flush.ws.close();
  });

  it("the fixtures' speech still gets contiguous one-second segments: Chromium's WebM, opusenc's Ogg", async () => {
    const chrome = await openTranscribe(em, { audioFormat: 'audio/webm;codecs=opus' });
    await sendAllAndEnd(chrome, chromeChunks('webm-opus'));
    assertTiles(finals(chrome.messages), 0, 9);
    const ogg = await openTranscribe(em, { audioFormat: 'audio/ogg;codecs=opus' });
    await sendAllAndEnd(ogg, evenChunks(fixture('dictation.ogg'), 4096));
    assertTiles(finals(ogg.messages), 0, 25.92);
  });

  it('media the detector cannot judge (MP3) counts as speech: 5 s of MP3 silence get their 5 segments', async () => {
    const mp3 = await make('anullsrc=r=16000:cl=mono:d=5', 0, ['-c:a', 'libmp3lame', '-b:a', '32k'], 'mp3');
    const c = await openTranscribe(em, { audioFormat: 'audio/mpeg' });
    await sendAllAndEnd(c, evenChunks(mp3, 2048));
    const media = em.sessions.at(-1)!.mediaSeconds;
    assert.ok(media > 4, `media ${media}`);
    assertTiles(finals(c.messages), 0, media);
  });
});
