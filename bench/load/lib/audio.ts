// What the load generator sends: a session's audio as pieces (byte ranges of a file) and the media
// time the upstream counts after each. The headline legs hold each session for minutes, as real
// dictations last: Chromium's recording looped with continuing timecodes (60 ms Opus packets), or an
// ffmpeg WebM with 20 ms packets (what Firefox and most encoders write); the churn leg keeps the 9 s
// recording, one set-up per 9 s, so set-up cost stays visible.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMediaClock } from '../../../src/emulator/index.js';
import { loopWebm } from '../../redis/lib/webm-loop.js';
import type { Audio } from './drive.js';

const fixtures = fileURLToPath(new URL('../../../test/fixtures/', import.meta.url));
const chromeDir = join(fixtures, 'chrome/webm-opus');
const webmConfig = { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/webm;codecs=opus' };

/** Chromium's own 250 ms MediaRecorder pieces, once (about 9 s). */
export function chromeWebm(): Audio {
  const files = readdirSync(chromeDir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => join(chromeDir, f));
  const bufs = files.map((f) => readFileSync(f));
  const clock = createMediaClock(bufs[0]);
  return {
    config: webmConfig,
    pieces: bufs.map((b, i) => ({ file: files[i], start: 0, end: b.length })),
    mediaEnds: bufs.map((b) => clock.add(b)),
    tolerance: 0,
  };
}

/** Chromium's recording looped to at least `seconds`, one continuous stream, written to `dir`. The
 * recording's last piece (60 ms, what the recorder had when it stopped) joins the piece before it:
 * mid-stream a recorder's pieces all hold about its timeslice. */
export function longChromeWebm(dir: string, seconds: number): Audio {
  const loop = loopWebm(chromeDir);
  const n = Math.ceil(seconds / loop.loopSeconds) * loop.pieces;
  const pieces: Buffer[] = [];
  const ends: number[] = [];
  for (let k = 0; k < n; k++) {
    const end = loop.sendAt(k + 1);
    if (k > 0 && end - ends.at(-1)! < 0.1) {
      pieces.push(Buffer.concat([pieces.pop()!, loop.piece(k)]));
      ends[ends.length - 1] = end;
    } else {
      pieces.push(loop.piece(k));
      ends.push(end);
    }
  }
  return fromPieces(join(dir, 'chrome-long.webm'), pieces, (k) => ends[k], webmConfig);
}

/** The dictation encoded by ffmpeg (libopus, 20 ms packets, 32 kb/s) as a live WebM of at least
 * `seconds`, cut in pieces of about 250 ms as a recorder with that timeslice sends them. */
export function opus20Webm(dir: string, seconds: number): Audio {
  const pcm = join(fixtures, 'dictation-16k-s16le.pcm');
  const args = ['-v', 'error', '-stream_loop', '-1', '-f', 's16le', '-ar', '16000', '-ac', '1', '-i', pcm];
  const out = ['-t', String(seconds), '-c:a', 'libopus', '-b:a', '32k', '-frame_duration', '20'];
  const r = spawnSync('ffmpeg', [...args, ...out, '-live', '1', '-f', 'webm', 'pipe:1'], {
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`ffmpeg failed: ${r.stderr?.toString() ?? r.error}`);
  return fromPieces(join(dir, 'opus20.webm'), ...recorderPieces(r.stdout), webmConfig);
}

/** The stream cut as a recorder with a 250 ms timeslice cuts it: after the packet that completes each
 * 250 ms of media (the media clock counts a packet once its last byte is in). */
function recorderPieces(stream: Buffer): [Buffer[], (k: number) => number] {
  const clock = createMediaClock(stream);
  const pieces: Buffer[] = [];
  const ends: number[] = [];
  let from = 0;
  for (let at = 1; at <= stream.length; at++) {
    const media = clock.add(stream.subarray(at - 1, at));
    if (media >= (ends.length + 1) * 0.25) {
      pieces.push(stream.subarray(from, at));
      ends.push(media);
      from = at;
    }
  }
  if (from < stream.length) pieces.push(Buffer.concat([pieces.pop()!, stream.subarray(from)])); // no media
  return [pieces, (k) => ends[k]];
}

/** 16 kHz mono s16le in 250 ms pieces (8000 bytes), the recording looped to at least `seconds`. */
export function pcmLoop(seconds: number): Audio {
  const file = join(fixtures, 'dictation-16k-s16le.pcm');
  const have = Math.floor(readFileSync(file).length / 8000);
  const n = Math.ceil(seconds / 0.25);
  return {
    config: { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/pcm;rate=16000;channels=1' },
    pieces: Array.from({ length: n }, (_, i) => ({ file, start: (i % have) * 8000, end: ((i % have) + 1) * 8000 })),
    mediaEnds: Array.from({ length: n }, (_, i) => (i + 1) * 0.25),
    tolerance: 0.04, // an Opus encoder emits whole 20 ms frames: up to two wait for the next piece
  };
}

/** Pieces written end to end to `file`, each with the media end `end(k)` the upstream counts after it. */
function fromPieces(file: string, pieces: Buffer[], end: (k: number) => number, config: object): Audio {
  writeFileSync(file, Buffer.concat(pieces));
  let at = 0;
  return {
    config,
    pieces: pieces.map((p) => ({ file, start: at, end: (at += p.length) })),
    mediaEnds: pieces.map((_, k) => end(k)),
    tolerance: 0,
  };
}
