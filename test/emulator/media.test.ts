import { describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { isSupportedAudioFormat, opusPacketSeconds, PacingCheck } from '../../src/emulator/index.js';
import { mediaSeconds } from '../support/emulator.js';
import { chromeChunks, fixture } from '../support/fixtures.js';

describe('emulator media time', () => {
  it('reads Opus packet durations from the TOC byte: the frame duration of its config times its frame count', () => {
    assert.equal(opusPacketSeconds(Uint8Array.of(0xf8)), 0.02); // CELT 20 ms, one frame
    assert.equal(opusPacketSeconds(Uint8Array.of((0x0b << 3) | 1)), 0.12); // SILK 60 ms, two frames
    assert.equal(opusPacketSeconds(Uint8Array.of((0x10 << 3) | 3, 6)), 0.015); // CELT 2.5 ms x 6
    assert.equal(opusPacketSeconds(Uint8Array.of()), 0);
  });

  it('counts Opus media exactly in Ogg and WebM, whatever the chunking', () => {
    const ogg = fixture('dictation.ogg');
    assert.equal(mediaSeconds([ogg]), 25.92);
    const bytes = [...ogg].map((b) => Buffer.of(b)); // headers in the first frame, then one byte at a time
    assert.equal(mediaSeconds([ogg.subarray(0, 64), ...bytes.slice(64)]), 25.92);
    assert.equal(mediaSeconds([fixture('dictation.webm')]), 25.9);
    assert.equal(mediaSeconds([fixture('convo-2ch.webm')]), 16);
  });

  it('counts Chromium live WebM chunks as the browser sent them', () => {
    assert.equal(mediaSeconds(chromeChunks('webm-opus')), 9);
  });

  it('estimates other codecs within 25% of their real duration (about 26 s)', () => {
    for (const f of ['dictation.mp3', 'dictation.flac', 'dictation.m4a', 'dictation-vorbis.ogg']) {
      const s = mediaSeconds([fixture(f)]);
      assert.ok(s > 19.5 && s < 32.5, `${f}: ${s}`);
    }
  });

  it('knows the upstream audioFormat list', () => {
    for (const ok of [
      'audio/ogg',
      'audio/webm;codecs=opus',
      'AUDIO/OGG; codecs=vorbis',
      'audio/mpeg',
      'audio/mp3',
      'audio/mpeg3',
      'audio/flac',
      'audio/mp4',
      'audio/m4a',
      'audio/opus',
      'audio/vorbis',
    ]) {
      assert.ok(isSupportedAudioFormat(ok), ok);
    }
    for (const bad of [
      'audio/wav',
      'audio/pcm;rate=16000',
      'audio/webm;codecs=pcm',
      'video/webm',
      'audio/ogg;codecs=flac',
    ]) {
      assert.ok(!isSupportedAudioFormat(bad), bad);
    }
  });
});

describe('emulator pacing rule (fake clock)', () => {
  /** Feeds 250 ms chunks arriving every `everyMs`; returns the violation, if any. */
  function feed(seconds: number, everyMs: (i: number) => number): string | null {
    const p = new PacingCheck();
    let t = 0;
    let found: string | null = null;
    for (let i = 1; i <= seconds * 4; i++) {
      t += everyMs(i);
      found ??= p.record(i * 0.25, t);
    }
    return found;
  }

  it('accepts real time and a 1.4x burst, refuses 2x real time', () => {
    assert.equal(
      feed(30, () => 250),
      null,
    );
    assert.equal(
      feed(30, () => 250 / 1.4),
      null,
    );
    assert.match(feed(30, () => 125) ?? '', /2\.00x real time/);
  });

  it('ignores the first 2 s of media and short bursts that average out over 5 s', () => {
    // 2 s sent instantly at the start, then real time: allowed.
    assert.equal(
      feed(30, (i) => (i <= 8 ? 0 : 250)),
      null,
    );
    // 1 s instantly every 5 s, real time otherwise averages below 1.5x.
    assert.equal(
      feed(30, (i) => (i % 20 < 4 ? 0 : 250 * (20 / 16) * 0.9)),
      null,
    );
    // 5 s of media arriving instantly later in the stream breaks the rule.
    assert.match(feed(30, (i) => (i > 40 && i <= 64 ? 0 : 250)) ?? '', /instantly|x real time/);
  });
});
