// Pacing with a fake clock: no faster than real time by media time, bounded buffering.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { LEAD_MS } from '../../src/audio/pacer.js';
import { chromeChunks, sendHeld, fixture, open } from './helpers.js';

test('a whole file pushed at once is released at real time', async () => {
  const run = open('audio/webm');
  run.pipeline.push(fixture('dictation.webm'));
  assert.ok(run.frames.length <= 2, 'only the first frame(s) go out at once');
  run.clock.advance(10_000);
  const at10 = Buffer.concat(run.frames).length;
  // By 10 s the pacer has released the frames starting up to its lead (LEAD_MS) past 10 s of media,
  // the last of them a frame of about chunkMs (250 ms, cut between 20 ms packets).
  assert.ok(
    run.pipeline.stats.mediaSecondsOut <= 10 + LEAD_MS / 1000 + 0.27 && run.pipeline.stats.mediaSecondsOut >= 9.5,
    `media out at 10 s: ${run.pipeline.stats.mediaSecondsOut}`,
  );
  assert.ok(at10 < fixture('dictation.webm').length * 0.5);
  await sendHeld(run);
  // The last frame starts about 25.6 s into the media, so it goes out about 25.6 s after the first.
  const span = run.times[run.times.length - 1] - run.times[0];
  assert.ok(span > 25_000 && span < 26_000, `released over ${span} ms`);
  run.pipeline.close();
});

test('pace 2 releases twice as fast', async () => {
  const run = open('audio/ogg', { pace: 2 });
  run.pipeline.push(fixture('dictation.ogg'));
  await sendHeld(run);
  const span = run.times[run.times.length - 1] - run.times[0];
  assert.ok(span > 11_000 && span < 13_500, `released over ${span} ms`);
  run.pipeline.close();
});

test('a real-time client sees no pacing delay: nothing piles up', async () => {
  const run = open('audio/webm;codecs=opus');
  for (const c of chromeChunks('webm-opus')) {
    // Each chunk arrives when its last sample has been recorded (the fixture's media runs a bit
    // faster than its 250 ms timeslice, so follow its media clock rather than the timeslice).
    run.pipeline.push(c);
    run.clock.advance(Math.max(0, run.pipeline.stats.mediaSecondsIn * 1000 - run.clock.now()));
    const waiting = run.pipeline.stats.bytesIn - run.pipeline.stats.bytesOut;
    assert.ok(waiting < 6000, `${waiting} bytes waiting`);
    // Within one chunk interval everything complete has gone out.
    run.clock.advance(250);
    assert.ok(run.pipeline.stats.bytesIn - run.pipeline.stats.bytesOut < 1500, 'sent within chunkMs');
  }
  await sendHeld(run);
  run.pipeline.close();
});

test('a partial frame waits at most chunkMs of wall time', async () => {
  const data = Buffer.concat(chromeChunks('webm-opus'));
  const run = open('audio/webm', { chunkMs: 1000 });
  run.pipeline.push(data.subarray(0, 3396 + 300)); // headers, 180 ms of media: under half of chunkMs
  const before = run.frames.length;
  run.clock.advance(999);
  assert.equal(run.frames.length, before);
  run.clock.advance(1);
  assert.ok(run.frames.length > before, 'sent after 1000 ms');
  run.pipeline.close();
});

test("a real-time client's piece goes upstream when it arrives, not with the next one", async () => {
  const run = open('audio/webm;codecs=opus');
  for (const c of chromeChunks('webm-opus').slice(0, 20)) {
    const sent = run.pipeline.stats.bytesOut;
    run.pipeline.push(c);
    // All but the block the piece cuts in two goes at once: no wait for the next piece or a timer.
    const waiting = run.pipeline.stats.bytesIn - run.pipeline.stats.bytesOut;
    assert.ok(run.pipeline.stats.bytesOut > sent, 'the piece went out at once');
    assert.ok(waiting < 1500, `${waiting} bytes held after the piece`);
    // The next piece comes once the media before it has been recorded (here 1 ms after; the
    // browser sends it later still).
    run.clock.advance(Math.max(0, Math.ceil(run.pipeline.stats.mediaSecondsIn * 1000) + 1 - run.clock.now()));
  }
  run.pipeline.close();
});

test("a real-time client's short last piece goes upstream when it arrives, not a chunk interval later", () => {
  const run = open('audio/webm;codecs=opus');
  const chunks = chromeChunks('webm-opus');
  for (const c of chunks.slice(0, -1)) {
    run.pipeline.push(c);
    run.clock.advance(Math.max(0, Math.ceil(run.pipeline.stats.mediaSecondsIn * 1000) + 1 - run.clock.now()));
  }
  const last = chunks.at(-1)!; // the recorder's stop: 60 ms of media, under half of chunkMs
  const media = run.pipeline.stats.mediaSecondsOut;
  run.pipeline.push(last);
  assert.equal(run.pipeline.stats.bytesIn - run.pipeline.stats.bytesOut, 0, 'nothing held after the last piece');
  assert.ok(run.pipeline.stats.mediaSecondsOut > media + 0.05, `media out ${run.pipeline.stats.mediaSecondsOut}`);
  run.pipeline.close();
});

test("a recorder's pieces each go upstream when they arrive, the short last one too (no pacing wait)", () => {
  const chunks = chromeChunks('webm-opus');
  // Where each piece's media ends: a live recorder sends a piece once its media is recorded.
  const scratch = open('audio/webm;codecs=opus');
  const ends = chunks.map((c) => (scratch.pipeline.push(c), scratch.pipeline.stats.mediaSecondsIn * 1000));
  scratch.pipeline.close();
  const run = open('audio/webm;codecs=opus');
  for (const [i, c] of chunks.entries()) {
    run.clock.advance(Math.ceil(ends[i]) - run.clock.now());
    const out = run.frames.length;
    run.pipeline.push(c);
    assert.ok(run.frames.length > out, `piece ${i} went out when it arrived`);
  }
  assert.equal(run.pipeline.stats.bytesIn - run.pipeline.stats.bytesOut, 0, 'nothing held after the last piece');
  run.pipeline.close();
});

test('small pieces at real time still coalesce, into frames of at least half of chunkMs', () => {
  const run = open('audio/webm;codecs=opus');
  const data = Buffer.concat(chromeChunks('webm-opus'));
  for (let off = 0; off < data.length; off += 500) {
    run.pipeline.push(data.subarray(off, off + 500)); // about 30 ms of media each
    run.clock.advance(Math.max(0, Math.ceil(run.pipeline.stats.mediaSecondsIn * 1000) + 1 - run.clock.now()));
  }
  run.clock.advance(250);
  const media = run.pipeline.stats.mediaSecondsOut;
  assert.ok(media > 8.9, `media out ${media}`);
  assert.ok(run.frames.length <= media / 0.125, `${run.frames.length} frames for ${media} s`);
  run.pipeline.close();
});

test('bytes beyond maxBufferedBytes: AUDIO_BUFFER_OVERRUN, then nothing more', async () => {
  const run = open('audio/webm', { maxBufferedBytes: 50_000 });
  const data = fixture('dictation.webm');
  run.pipeline.push(data.subarray(0, 40_000));
  assert.equal(run.errors.length, 0);
  run.pipeline.push(data.subarray(40_000));
  assert.deepEqual(
    run.errors.map((e) => e.id),
    ['AUDIO_BUFFER_OVERRUN'],
  );
  const n = run.frames.length;
  run.clock.advance(60_000);
  run.pipeline.push(data);
  await run.pipeline.sendHeld();
  assert.equal(run.frames.length, n);
  assert.equal(run.errors.length, 1);
});

test('sending what is held mid-stream (client flush) sends the partial frame at once and the stream goes on', async () => {
  const data = fixture('dictation.webm');
  const run = open('audio/webm', { chunkMs: 60_000 }); // longer than the file: nothing goes before the flush
  run.pipeline.push(data.subarray(0, 30_000));
  const before = Buffer.concat(run.frames).length;
  const flushed = run.pipeline.sendHeld();
  run.clock.advance(30_000);
  await flushed;
  const after = Buffer.concat(run.frames).length;
  assert.ok(after > before, 'the partial frame went out');
  assert.ok(30_000 - after < 1000, `${30_000 - after} bytes still held (at most one incomplete block)`);
  run.pipeline.push(data.subarray(30_000));
  await sendHeld(run);
  assert.ok(Buffer.concat(run.frames).equals(data));
  assert.equal(run.errors.length, 0);
  run.pipeline.close();
});

test("after a replay carried a client's backlog, its live pieces go upstream as they arrive", async () => {
  // A client back from a reconnection sends what it queued meanwhile at once (3 s here), then its live
  // pieces at real time. The replay of the new upstream session carries the backlog (discardQueued); the
  // live pieces must not then wait the backlog's length behind a pace set by its late first bytes.
  const chunks = chromeChunks('webm-opus');
  const backlog = 12; // about 3.5 s of media
  const run = open('audio/webm;codecs=opus');
  for (const c of chunks.slice(0, backlog)) run.pipeline.push(c);
  run.pipeline.discardQueued();
  for (const c of chunks.slice(backlog, backlog + 12)) {
    run.clock.advance(300); // a piece of this recording holds about 290 ms
    const sent = run.pipeline.stats.bytesOut;
    run.pipeline.push(c);
    assert.ok(run.pipeline.stats.bytesOut > sent, `a live piece went out when it came (${run.clock.now()} ms)`);
  }
  run.pipeline.close();
});
