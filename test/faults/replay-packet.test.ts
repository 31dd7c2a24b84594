// The replay buffer starts a replay at the Opus packet that holds the released time (the end of the
// last final), not at the WebM Cluster or Ogg page around it, over real streams: Chromium's live
// WebM (60 ms packets), ffmpeg's WebM with 5 s Clusters of known size (its first block a BlockGroup),
// opusenc's Ogg (1 s pages) and ffmpeg's Ogg with 1.3 s pages. Each replay is read by the demuxers
// the emulator counts audio with (prism-media) and decoded by ffmpeg: it starts at 0, holds exactly
// the audio from the packet on, and its Ogg pages check.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Unit } from '../../src/audio/containers/unit.js';
import { createReplayBuffer } from '../../src/audio/replay.js';
import { createParser } from '../../src/audio/source.js';
import { createMediaClock } from '../../src/emulator/media-clock.js';
import { parseOggPages, run } from '../audio-transcode/ogg-check.js';
import { chromeChunks, fixture, FIXTURES } from '../support/fixtures.js';

/** The longest packet of these streams (Chromium's): a replay starts less than this before the cut. */
const PACKET = 0.06;
let dir: string;
let files = 0;

/** Seconds of Opus the emulator counts in `bytes` (prism-media's demuxer, each packet's TOC). */
function counted(bytes: Buffer): number {
  const clock = createMediaClock(bytes);
  return clock.add(bytes);
}

/** ffmpeg decodes the stream without an error; ffprobe's first packet time. */
async function decodes(bytes: Buffer, ext: string): Promise<number> {
  const file = join(dir, `p${files++}.${ext}`);
  await writeFile(file, bytes);
  const dec = await run('ffmpeg', [
    '-nostdin',
    '-v',
    'error',
    '-i',
    file,
    '-f',
    's16le',
    '-ac',
    '1',
    '-y',
    '/dev/null',
  ]);
  assert.equal(dec.stderr, '', 'ffmpeg decodes the replay without an error');
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'a:0',
    '-show_entries',
    'packet=pts_time',
    '-of',
    'csv=p=0',
    file,
  ]);
  return parseFloat(stdout.split('\n')[0]);
}

/** As the pipeline parses WebM: runs of blocks up to half of its default 250 ms frame, one unit each. */
const RUNS = { runSeconds: 0.125 };

async function check(kind: 'webm' | 'ogg', chunks: Buffer[], cuts: number[], label: string): Promise<void> {
  if (kind === 'webm') await checkParsed(kind, chunks, cuts, `${label}, a unit per run of blocks`, RUNS);
  await checkParsed(kind, chunks, cuts, label, {});
}

async function checkParsed(
  kind: 'webm' | 'ogg',
  chunks: Buffer[],
  cuts: number[],
  label: string,
  o: { runSeconds?: number },
): Promise<void> {
  const parser = createParser(kind, o);
  const units: Unit[] = chunks.flatMap((c) => parser.push(c));
  if (o.runSeconds)
    assert.ok(
      units.some((u) => u.end! - u.start! > 0.1),
      `${label}: runs of blocks were made`,
    );
  const whole = counted(Buffer.concat(units.map((u) => u.bytes)));
  for (const cut of cuts) {
    const buf = createReplayBuffer(kind, { maxBytes: 8 << 20 });
    for (const u of units) buf.add(u);
    buf.release(cut);
    const r = buf.replay();
    const replay = Buffer.concat(r.frames);
    assert.ok(
      r.offset <= cut + 1e-6 && r.offset > cut - PACKET,
      `${label}: replay at ${r.offset} for a final ending at ${cut}: more than one packet before it`,
    );
    const audio = counted(replay);
    assert.ok(
      Math.abs(audio - (whole - r.offset)) < 0.0025,
      `${label} @${cut}: the replay holds ${audio} s of audio, the stream ${whole} s from ${r.offset}`,
    );
    const first = await decodes(replay, kind);
    assert.ok(
      Math.abs(first) <= 0.0066,
      `${label} @${cut}: the replay's first packet is at ${first}, not 0 (less an Opus pre-skip)`,
    );
    if (kind === 'ogg')
      assert.ok(
        parseOggPages(replay).every((p) => p.crcOk),
        `${label} @${cut}: every page's CRC checks`,
      );
  }
}

describe('a replay starts at the packet that holds the end of the last final', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'replay-packet-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("Chromium's live WebM", async () => {
    await check('webm', chromeChunks('webm-opus'), [0.5, 2, 2.34, 3.31, 5.99], 'chrome');
  });

  it("ffmpeg's WebM with 5 s Clusters of known size", async () => {
    await check('webm', [fixture('dictation.webm')], [0.01, 1, 2.5, 4.99, 7.3, 12, 24.6], 'webm 5 s');
  });

  it("opusenc's Ogg (1 s pages) and ffmpeg's Ogg with 1.3 s pages", async () => {
    await check('ogg', [fixture('dictation.ogg')], [0.5, 2.34, 7.01, 11.3], 'opusenc');
    const file = join(dir, 'pages-1300ms.ogg');
    await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-i',
      join(FIXTURES, 'dictation.ogg'),
      '-c:a',
      'copy',
      '-f',
      'ogg',
      '-page_duration',
      '1300000',
      file,
    ]);
    await check('ogg', [await readFile(file)], [1, 2, 3.9, 20.05], 'ogg 1.3 s');
  });
});
