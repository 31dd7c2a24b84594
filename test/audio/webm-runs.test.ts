// The WebM parser makes one unit of a run of blocks (as the pipeline parses, up to half of a 250 ms
// frame), not a unit per Opus packet: the same bytes and media in a fraction of the units, each run
// a view of the client's piece.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { pieceCopy } from '../../src/audio/containers/byte-queue.js';
import type { Unit } from '../../src/audio/containers/unit.js';
import { WebmParser } from '../../src/audio/containers/webm.js';
import { evenChunks } from '../support/fixtures.js';
import { chromeChunks, fixture, open, sendHeld } from './helpers.js';

const RUN_SECONDS = 0.125;

function parse(pieces: Buffer[], runSeconds: number): { units: Unit[]; inPiece: boolean } {
  const parser = new WebmParser({ runSeconds });
  const units: Unit[] = [];
  let inPiece = true;
  for (const received of pieces) {
    const piece = pieceCopy(received);
    for (const u of parser.push(piece)) {
      units.push(u);
      if (u.start !== undefined && u.bytes.buffer !== piece.buffer) inPiece = false;
    }
  }
  return { units, inPiece };
}

const media = (units: Unit[]) => units.filter((u) => u.start !== undefined);

describe('runs of WebM blocks', () => {
  const streams: Array<[string, Buffer[], number]> = [
    ["Chromium's 60 ms packets, a Cluster per piece", chromeChunks('webm-opus'), 60],
    ["ffmpeg's 20 ms packets in 5 s Clusters, 1 KB pieces", evenChunks(fixture('dictation.webm'), 1000), 20],
  ];
  for (const [label, pieces, packetMs] of streams)
    it(`${label}: the same bytes and media in fewer units, each run at most ${RUN_SECONDS * 1000} ms`, () => {
      const one = parse(pieces, 0).units,
        runs = parse(pieces, RUN_SECONDS);
      assert.ok(Buffer.concat(runs.units.map((u) => u.bytes)).equals(Buffer.concat(one.map((u) => u.bytes))));
      const [a, b] = [media(one), media(runs.units)];
      assert.equal(b[0].start, a[0].start);
      assert.equal(b.at(-1)!.end, a.at(-1)!.end);
      for (let i = 1; i < b.length; i++)
        assert.ok(Math.abs(b[i].start! - b[i - 1].end!) < 1e-6, `run ${i} starts where the one before ends`);
      for (const u of b) assert.ok(u.end! - u.start! <= RUN_SECONDS + 1e-6, `a run of ${u.end! - u.start!} s`);
      const perRun = Math.floor((RUN_SECONDS * 1000) / packetMs);
      assert.ok(b.length < a.length / Math.min(4, perRun - 0.5), `${b.length} runs for ${a.length} packets`);
      assert.ok(runs.inPiece || packetMs === 20, 'each run is a view of its own piece (Chromium: a piece copied once)');
    });
});

describe('the pipeline', () => {
  it("routes Chromium's WebM/Opus in runs: one or two units per piece, not one per packet", async () => {
    const pieces = chromeChunks('webm-opus');
    let mediaUnits = 0;
    const run = open('audio/webm;codecs=opus', { onUnit: (u) => void (u.start !== undefined && mediaUnits++) });
    for (const piece of pieces) run.pipeline.push(piece);
    await sendHeld(run);
    assert.equal(run.errors.length, 0);
    assert.ok(Buffer.concat(run.frames).equals(Buffer.concat(pieces)), 'the stream goes upstream as it came');
    // 30 pieces of 300 ms hold 150 Opus packets of 60 ms: runs of two packets (120 ms) and a tail.
    assert.ok(mediaUnits <= pieces.length * 3, `${mediaUnits} units for ${pieces.length} pieces`);
    run.pipeline.close();
  });
});
