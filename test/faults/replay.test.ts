// The replay buffer for upstream reconnection, over real streams: Chrome's live WebM/Opus, an
// opusenc Ogg/Opus file and the transcoder's own (chained) Ogg/Opus, through the real parsers.
// Replays are checked with real ffprobe/ffmpeg: they decode, start at 0, and last what was kept.
import { afterAll, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Unit } from '../../src/audio/containers/unit.js';
import { createReplayBuffer, type ReplayKind } from '../../src/audio/replay.js';
import { PcmRoute } from '../../src/audio/routes.js';
import { createParser } from '../../src/audio/source.js';
import { closeDefaultEncoderPool } from '../../src/audio/transcode/index.js';
import { opusHead, opusTags } from '../../src/audio/transcode/opus-headers.js';
import { writePage } from '../../src/audio/transcode/ogg-page.js';
import { parseOggPages, run } from '../audio-transcode/ogg-check.js';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';

let dir: string;
let files = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'replay-test-'));
});
afterAll(async () => {
  await closeDefaultEncoderPool();
  await rm(dir, { recursive: true, force: true });
});

/** As the pipeline parses: WebM blocks in runs of up to half of its default 250 ms frame. */
function parse(container: 'webm' | 'ogg' | 'wav', chunks: Buffer[]): Unit[] {
  const p = createParser(container, { runSeconds: 0.125 });
  return chunks.flatMap((c) => p.push(c));
}

/** The transcoder's Ogg/Opus for the 16 kHz WAV, one chained stream per part (a client flush between). */
async function transcoded(parts: number): Promise<Unit[]> {
  const wav = fixture('dictation-16k.wav');
  const chunks = evenChunks(wav, 16000);
  const pcm = parse('wav', chunks).filter((u) => u.payload);
  const out: Unit[] = [];
  const route = new PcmRoute(
    { sampleRate: 16000, channels: 1, encoding: 's16le' },
    { unit: (u) => out.push(u), batchEnd: () => {} },
    (e) => {
      throw e;
    },
  );
  const per = Math.ceil(pcm.length / parts);
  for (let i = 0; i < pcm.length; i += per) {
    for (const u of pcm.slice(i, i + per)) route.unit(u);
    await route.finish();
  }
  return out;
}

interface Probe {
  first: number;
  last: number;
  maxStep: number;
  decoded: number;
}

/** What ffmpeg makes of `bytes`: packet times, and decoded seconds (any decoder error fails). */
async function probe(bytes: Buffer, ext: string): Promise<Probe> {
  const file = join(dir, `r${files++}.${ext}`);
  await writeFile(file, bytes);
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
  const pts = stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => parseFloat(l));
  const dec = await run('ffmpeg', ['-v', 'error', '-i', file, '-f', 's16le', '-ar', '48000', '-ac', '1', 'pipe:1'], {
    encoding: 'buffer',
    maxBuffer: 64 << 20,
  });
  assert.equal(dec.stderr.toString(), '', 'ffmpeg decodes the replay without an error');
  let maxStep = 0;
  for (let i = 1; i < pts.length; i++) maxStep = Math.max(maxStep, pts[i] - pts[i - 1]);
  return {
    first: pts[0],
    last: pts[pts.length - 1],
    maxStep,
    decoded: (dec.stdout as unknown as Buffer).length / 2 / 48000,
  };
}

const ext = (kind: ReplayKind) => (kind === 'webm' ? 'webm' : 'ogg');
const whole = (units: Unit[]) => Buffer.concat(units.map((u) => u.bytes));
const mediaEnd = (units: Unit[]) => Math.max(...units.map((u) => u.end ?? 0));

/** Adds the units up to `upTo` seconds, releases `at`, replays, then adds the rest (what add()
 *  returns goes on after the replay): the new upstream's stream, and the replay's offset. */
function reconnect(kind: ReplayKind, units: Unit[], at: number, upTo = Infinity, maxBytes = 8 << 20) {
  const buf = createReplayBuffer(kind, { maxBytes });
  let i = 0;
  for (; i < units.length && (units[i].start ?? 0) < upTo; i++) {
    buf.add(units[i]);
    assert.ok(buf.bufferedBytes <= maxBytes, 'the bound holds');
  }
  buf.release(at);
  const r = buf.replay();
  assert.equal(
    r.bytes,
    r.frames.reduce((n, f) => n + f.length, 0),
  );
  assert.ok(
    r.frames.every((f) => f.length <= 64000),
    'frames within the upstream frame bound',
  );
  const rest = units.slice(i).map((u) => buf.add(u).bytes);
  return { buf, replay: r, stream: Buffer.concat([...r.frames, ...rest]) };
}

/** The replay starts where the original did (~0), its last packet is the original's moved by
 *  `offset`, and it decodes to the original's length minus `offset`, within two 20 ms frames. */
function assertRetimed(p: Probe, full: Probe, offset: number): void {
  assert.ok(Math.abs(p.first - full.first) < 0.001, `first packet at ${p.first}, the original's at ${full.first}`);
  assert.ok(
    Math.abs(p.last - (full.last - offset)) < 0.001,
    `last packet at ${p.last}, expected ${full.last} - ${offset}`,
  );
  assert.ok(
    Math.abs(p.decoded - (full.decoded - offset)) < 0.041,
    `decoded ${p.decoded} s, expected ${full.decoded} - ${offset}`,
  );
}

/** A replay of everything after `at`, retimed; the offset is at or before `at`, less than `group`
 *  seconds before it. */
async function checkReplay(kind: ReplayKind, units: Unit[], at: number, group: number, full: Probe): Promise<void> {
  const { replay } = reconnect(kind, units, at);
  assert.ok(
    replay.offset <= at + 1e-9 && replay.offset > Math.min(at, mediaEnd(units)) - group,
    `offset ${replay.offset} for release at ${at}`,
  );
  assertRetimed(await probe(Buffer.concat(replay.frames), ext(kind)), full, replay.offset);
}

/** Replay mid-stream, then the live stream goes on: one stream on the new timeline, no jump. */
async function checkContinuation(kind: ReplayKind, units: Unit[], at: number, full: Probe): Promise<void> {
  const { replay, stream } = reconnect(kind, units, at, at + 2);
  const p = await probe(stream, ext(kind));
  assert.ok(p.maxStep <= full.maxStep + 0.001, `no jump in packet times (${p.maxStep} s step)`);
  assertRetimed(p, full, replay.offset);
}

describe('WebM (Chrome MediaRecorder, live clusters)', () => {
  const units = parse('webm', chromeChunks('webm-opus'));
  let full: Probe;
  beforeAll(async () => {
    full = await probe(whole(units), 'webm');
  });

  it('replays from the cluster holding the released time, cluster timecodes lowered to start at 0', async () => {
    for (const at of [0, 0.05, 3.31, 7, mediaEnd(units) - 0.2, mediaEnd(units) + 5])
      await checkReplay('webm', units, at, 0.35, full);
  });

  it('goes on after the replay with cluster timecodes on the new timeline', async () => {
    await checkContinuation('webm', units, 4.2, full);
  });

  it('goes on after a replay that starts mid-Cluster: the rest of that Cluster, a run of blocks, moves back with it', async () => {
    // 4.3 s is in the Cluster of 4.2-4.5 s, in its second block: the replay starts there, and the
    // blocks of that Cluster still to come (a run, one unit) must be moved back by the same 60 ms.
    const { replay, stream } = reconnect('webm', units, 4.3, 4.31);
    const p = await probe(stream, 'webm');
    assert.ok(p.maxStep <= full.maxStep + 0.001, `no jump in packet times (${p.maxStep} s step)`);
    assertRetimed(p, full, replay.offset);
  });

  it('keeps the initialization data but drops the oldest clusters past maxBytes, counted', async () => {
    const maxBytes = 20_000;
    const { buf, replay } = reconnect('webm', units, 0, Infinity, maxBytes);
    const media = units.filter((u) => !u.header).reduce((n, u) => n + u.bytes.length, 0);
    const init = units.filter((u) => u.header).reduce((n, u) => n + u.bytes.length, 0);
    assert.equal(buf.droppedBytes, media - (buf.bufferedBytes - init));
    assert.ok(buf.droppedBytes > media / 2);
    assert.ok(replay.offset > mediaEnd(units) - 5);
    assertRetimed(await probe(Buffer.concat(replay.frames), 'webm'), full, replay.offset);
  });

  it('a cluster bigger than maxBytes is dropped with the rest of it, and every dropped byte is counted', () => {
    const maxBytes = 3000; // under one 300 ms cluster
    const { buf } = reconnect('webm', units, 0, Infinity, maxBytes);
    const media = units.filter((u) => !u.header).reduce((n, u) => n + u.bytes.length, 0);
    const init = units.filter((u) => u.header).reduce((n, u) => n + u.bytes.length, 0);
    assert.equal(buf.droppedBytes, media - (buf.bufferedBytes - init));
    assert.ok(buf.bufferedBytes <= maxBytes);
  });

  it('rewrites a sized Segment as live and leaves out SeekHead and Cues (ffmpeg file, 5 s clusters)', async () => {
    const file = parse('webm', [fixture('dictation.webm')]);
    const fileFull = await probe(whole(file), 'webm');
    await checkReplay('webm', file, 12, 5.1, fileFull);
    const { replay } = reconnect('webm', file, 12);
    const ids = replay.frames[0].subarray(0, 60).toString('hex');
    assert.ok(ids.includes('1853806701ffffffffffffff'), 'Segment of unknown size');
    assert.ok(!Buffer.concat(replay.frames).includes(Buffer.from('1c53bb6b', 'hex')), 'no Cues');
  });
});

describe('Ogg/Opus', () => {
  it('client Ogg (opusenc): replays from a page, granules lowered, pages renumbered, CRCs right', async () => {
    const units = parse('ogg', [fixture('dictation.ogg')]);
    const full = await probe(whole(units), 'ogg');
    for (const at of [0, 2.5, 11, mediaEnd(units) + 1]) await checkReplay('ogg', units, at, 1.01, full);
    await checkContinuation('ogg', units, 5.5, full);
    const { stream } = reconnect('ogg', units, 9.2, 12);
    const pages = parseOggPages(stream);
    assert.ok(pages.every((p) => p.crcOk));
    assert.deepEqual(
      pages.map((p) => p.sequence),
      pages.map((_, i) => i),
    );
  });

  it("the transcoder's output, one chained stream per client flush: the latest chain's headers start a replay past the first", async () => {
    const units = await transcoded(2);
    const serials = new Set(units.map((u) => u.bytes.readUInt32LE(14)));
    assert.equal(serials.size, 2);
    const second = units.find((u, i) => i > 0 && u.header && u.bytes[5] & 2) as Unit;
    const chain2 = units.slice(units.indexOf(second));
    const full2 = await probe(whole(chain2), 'ogg');
    const base = chain2.find((u) => u.start !== undefined)?.start as number;
    const at = base + 3;
    const { replay } = reconnect('ogg', units, at);
    const pages = parseOggPages(Buffer.concat(replay.frames));
    assert.equal(new Set(pages.map((p) => p.serial)).size, 1, 'only the latest chain');
    assert.ok(pages.every((p) => p.crcOk));
    assertRetimed(await probe(Buffer.concat(replay.frames), 'ogg'), full2, replay.offset - base);
    assert.ok(replay.offset <= at && replay.offset > at - 0.2);
  });

  it('a replay that starts in the first chain carries both chains, each with its headers', async () => {
    const units = await transcoded(2);
    const { replay } = reconnect('ogg', units, 4);
    const pages = parseOggPages(Buffer.concat(replay.frames));
    assert.equal(pages.filter((p) => p.flags & 2).length, 2, 'two BOS pages');
    assert.ok(pages.every((p) => p.crcOk));
    assert.equal(
      pages[2].granule > 0n && pages[2].granule < 48000n / 5n + 48000n,
      true,
      'first media page granule near 0',
    );
    const p = await probe(Buffer.concat(replay.frames), 'ogg');
    assert.ok(
      Math.abs(p.decoded - (mediaEnd(units) - replay.offset)) < 0.1,
      `decoded ${p.decoded} of ${mediaEnd(units) - replay.offset}`,
    );
  });
});

describe('hostile streams', () => {
  it('thousands of header-only chained Ogg streams keep only the latest headers', () => {
    const chains = Array.from({ length: 2000 }, (_, i) =>
      Buffer.concat([
        writePage({
          flags: 2,
          granule: 0n,
          serial: i,
          sequence: 0,
          packets: [opusHead({ channels: 1, preSkip: 312, inputSampleRate: 16000 })],
        }),
        writePage({ flags: 0, granule: 0n, serial: i, sequence: 1, packets: [opusTags()] }),
      ]),
    );
    const units = parse('ogg', chains);
    const buf = createReplayBuffer('ogg', { maxBytes: 1 << 20 });
    for (const u of units) buf.add(u);
    assert.equal(buf.bufferedBytes, chains[0].length);
    assert.equal(parseOggPages(Buffer.concat(buf.replay().frames))[0].serial, 1999);
  });
});

describe("'other' containers", () => {
  it('MP3: header units kept, frames from the first unreleased one, offset its start', () => {
    const p = createParser('mp3');
    const units = p.push(fixture('dictation.mp3'));
    const buf = createReplayBuffer('other', { maxBytes: 1 << 20 });
    for (const u of units) buf.add(u);
    buf.release(10);
    const r = buf.replay();
    const first = units.find((u) => (u.end ?? 0) > 10) as Unit;
    assert.equal(r.offset, first.start);
    const kept = units.filter((u) => u.header || (u.end ?? 0) > 10);
    assert.deepEqual(Buffer.concat(r.frames), whole(kept));
  });
});
