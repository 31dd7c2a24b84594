// Chromium's WebM/Opus fixture (about 9 s) as a live stream that never ends: the EBML header and
// Tracks once, then the Clusters again and again. Each loop moves every Cluster Timecode on by the
// loops already sent, so the gateway sees one continuous recording, as from a long dictation. The
// Clusters are live (unknown size) and their blocks' timecodes are relative to the Cluster, so
// rewriting the Cluster Timecode element is all a loop needs.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createMediaClock } from '../../../src/emulator/index.js';

const CLUSTER = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);
/** Cluster id (4) and its unknown size (8): the Timecode element (0xE7) follows. */
const CLUSTER_HEAD = 12;
const TIMECODE = 0xe7;
/** Every Timecode is written as 4 bytes (0x84), so every loop has the same byte layout. */
const WIDE = 4;

export interface LoopedWebm {
  /** Piece k of the endless stream (loop ⌊k / pieces⌋). */
  piece(k: number): Buffer;
  /** Media seconds at which piece k may be sent (a recorder has it then). */
  sendAt(k: number): number;
  /** Pieces per loop, and its media seconds. */
  pieces: number;
  loopSeconds: number;
}

interface Rewrite {
  piece: number;
  at: number; // offset of the 4-byte value in the piece
  ms: number; // the first loop's timecode
}

export function loopWebm(dir: string): LoopedWebm {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => readFileSync(join(dir, f)));
  const clock = createMediaClock(files[0]);
  const ends = files.map((p) => clock.add(p));
  const loopMs = Math.round(ends.at(-1)! * 1000);
  const { pieces, rewrites, headerBytes } = widen(files);
  return {
    pieces: pieces.length,
    loopSeconds: loopMs / 1000,
    sendAt: (k) =>
      Math.floor(k / pieces.length) * (loopMs / 1000) + (k % pieces.length ? ends[(k % pieces.length) - 1] : 0),
    piece(k) {
      const loop = Math.floor(k / pieces.length);
      const j = k % pieces.length;
      // After the first loop the header is not sent again: piece 0 starts at its first Cluster.
      const skip = loop > 0 && j === 0 ? headerBytes : 0;
      const out = Buffer.from(pieces[j].subarray(skip));
      for (const r of rewrites) if (r.piece === j) out.writeUInt32BE(r.ms + loop * loopMs, r.at - skip);
      return out;
    },
  };
}

/** The fixture with every Cluster Timecode 4 bytes wide, cut where the original pieces were cut (a
 * cut inside a Cluster's head moves to the head's start, so each Timecode lies in one piece). */
function widen(files: Buffer[]): { pieces: Buffer[]; rewrites: Rewrite[]; headerBytes: number } {
  const all = Buffer.concat(files);
  const parts: Buffer[] = [];
  const values: Array<{ at: number; ms: number }> = []; // offsets in the widened stream
  // Each Cluster head: where it starts and its Timecode ends (original), where it starts widened,
  // and how much the stream has grown once its Timecode is widened.
  const heads: Array<{ at: number; end: number; wideAt: number; grown: number }> = [];
  let from = 0;
  let grown = 0;
  for (let c = all.indexOf(CLUSTER); c >= 0; c = all.indexOf(CLUSTER, from)) {
    const tc = c + CLUSTER_HEAD;
    if (all[tc] !== TIMECODE) throw new Error(`no Cluster Timecode at ${tc}`);
    const len = all[tc + 1] & 0x0f; // its size is one byte (0x81..0x88)
    parts.push(all.subarray(from, tc), Buffer.from([TIMECODE, 0x80 | WIDE, 0, 0, 0, 0]));
    values.push({ at: tc + grown + 2, ms: all.readUIntBE(tc + 2, len) });
    heads.push({ at: c, end: tc + 2 + len, wideAt: c + grown, grown: grown + WIDE - len });
    grown += WIDE - len;
    from = tc + 2 + len;
  }
  parts.push(all.subarray(from));
  const wide = Buffer.concat(parts);
  const widened = (x: number) => {
    const h = heads.filter((h) => h.at <= x).at(-1);
    return !h ? x : x < h.end ? h.wideAt : x + h.grown;
  };
  const cuts: number[] = [];
  for (let i = 0, x = 0; i < files.length; x += files[i++].length) cuts.push(widened(x));
  cuts.push(wide.length);
  const pieces = files.map((_, i) => wide.subarray(cuts[i], cuts[i + 1]));
  const rewrites = values.map(({ at, ms }) => {
    const piece = cuts.filter((x) => x <= at).length - 1;
    return { piece, at: at - cuts[piece], ms };
  });
  return { pieces, rewrites, headerBytes: heads[0].wideAt };
}
