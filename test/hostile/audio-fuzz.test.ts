// Hostile audio: every fixture truncated, with bytes mutated and box/element sizes overwritten, in random
// chunkings with flushes between: each case ends normally or with one of the client-facing audio
// errors, never INTERNAL, never a thrown exception, never a frame over 64000 bytes. Seeded: the
// same cases on every run.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'vitest';
import { chromeChunks, sendHeld, fixture, FIXTURES, open, prng } from '../audio/helpers.js';

const ALLOWED = new Set(['AUDIO_MALFORMED', 'AUDIO_UNRECOGNIZED', 'AUDIO_FORMAT_MISMATCH', 'AUDIO_BUFFER_OVERRUN']);
const CASES_PER_KIND = 80;
/** Transcoded sources are cut to this much before mutating, and get fewer cases: their parsers see
 * the same structure, and the encoder's real work (a worker, a resampler) is not what is tested. */
const TRANSCODED_PREFIX = 16 * 1024;
const TRANSCODED_CASES_PER_KIND = 20;

interface Source {
  name: string;
  data: Buffer;
  declared?: string;
  transcoded: boolean;
}

function sources(): Source[] {
  const out: Source[] = readdirSync(FIXTURES)
    .filter((f) => /\.(ogg|webm|wav|pcm|mp3|flac|m4a)$/.test(f))
    .map((name) => ({
      name,
      data: fixture(name),
      transcoded: /\.(wav|pcm)$/.test(name),
      declared: name.endsWith('.pcm') ? 'audio/pcm;rate=16000;channels=1' : undefined,
    }));
  for (const folder of readdirSync(`${FIXTURES}/chrome`)) {
    out.push({
      name: `chrome/${folder}`,
      data: Buffer.concat(chromeChunks(folder)),
      transcoded: folder.includes('pcm'),
    });
  }
  return out.map((s) => (s.transcoded ? { ...s, data: s.data.subarray(0, TRANSCODED_PREFIX) } : s));
}

type Field = [offset: number, width: number];

/** Where the size fields of the container's structure are (MP4 boxes, EBML elements, Ogg
 * lacing, RIFF chunks, FLAC metadata blocks): the bytes a hostile client would lie in. */
function sizeFields(b: Buffer): Field[] {
  const out: Field[] = [];
  const magic = b.toString('latin1', 0, 4);
  if (b.toString('latin1', 4, 8) === 'ftyp') mp4Boxes(b, 0, b.length, out);
  else if (b.readUInt32BE(0) === 0x1a45dfa3) ebml(b, 0, b.length, out);
  else if (magic === 'OggS') {
    for (let off = 0; off + 27 <= b.length && out.length < 400;) {
      const n = b[off + 26];
      out.push([off + 26, 1], [off + 27, 1], [off + 26 + n, 1]);
      let body = 0;
      for (let i = 0; i < n; i++) body += b[off + 27 + i] ?? 0;
      off += 27 + n + body;
    }
  } else if (magic === 'RIFF') {
    out.push([4, 4]);
    for (
      let off = 12;
      off + 8 <= b.length && out.length < 20;
      off += 8 + b.readUInt32LE(off + 4) + (b.readUInt32LE(off + 4) & 1)
    )
      out.push([off + 4, 4]);
  } else if (magic === 'fLaC') {
    for (let off = 4; off + 4 <= b.length && out.length < 20; off += 4 + b.readUIntBE(off + 1, 3)) {
      out.push([off, 1], [off + 1, 3]);
      if (b[off] & 0x80) break;
    }
  }
  return out;
}

const MP4_PARENTS = new Set(['moov', 'trak', 'mdia', 'minf', 'stbl', 'mvex', 'moof', 'traf', 'edts', 'dinf']);

function mp4Boxes(b: Buffer, from: number, to: number, out: Field[]): void {
  for (let off = from; off + 8 <= to && out.length < 400;) {
    const size = b.readUInt32BE(off),
      type = b.toString('latin1', off + 4, off + 8);
    if (size < 8 || off + size > to) return;
    out.push([off, 4]);
    if (MP4_PARENTS.has(type)) mp4Boxes(b, off + 8, off + size, out);
    else if (type === 'stsd') mp4Boxes(b, off + 16, off + size, out);
    else if (type === 'Opus' || type === 'mp4a') mp4Boxes(b, off + 36, off + size, out);
    else if (type === 'trun' || type === 'tfhd' || type === 'stco' || type === 'esds')
      out.push([off + 8, 4], [off + 12, 4]);
    off += size;
  }
}

const EBML_PARENTS = new Set([0x1a45dfa3, 0x18538067, 0x1f43b675, 0x1654ae6b, 0xae, 0xe1, 0x1549a966, 0xa0]);

function ebml(b: Buffer, from: number, to: number, out: Field[]): void {
  for (let off = from; off < to && out.length < 400;) {
    const idLen = vintLength(b[off]),
      sizeLen = vintLength(b[off + idLen] ?? 0);
    if (!idLen || !sizeLen || off + idLen + sizeLen > to) return;
    const id = b.readUIntBE(off, idLen);
    let size = b[off + idLen] & (0xff >> sizeLen);
    for (let i = 1; i < sizeLen; i++) size = size * 256 + b[off + idLen + i];
    out.push([off + idLen, sizeLen]);
    const body = off + idLen + sizeLen;
    const end = size === 2 ** (7 * sizeLen) - 1 ? to : Math.min(to, body + size);
    if (EBML_PARENTS.has(id)) ebml(b, body, end, out);
    else if (id === 0xa3) out.push([body, 1], [body + 1, 2]); // a block's track number and timecode
    off = end;
  }
}

function vintLength(first: number): number {
  for (let i = 0; i < 8; i++) if (first & (0x80 >> i)) return i + 1;
  return 0;
}

/** One hostile variant of `data`: truncated, bytes mutated, or a size field overwritten (then
 * perhaps truncated too). */
function variant(data: Buffer, kind: number, r: () => number, fields: Field[]): Buffer {
  const cut = (b: Buffer) => b.subarray(0, Math.floor(r() * (b.length + 1)));
  const int = (n: number) => Math.floor(r() * n);
  if (kind === 0) return cut(data);
  const b = Buffer.from(data);
  if (kind === 1) {
    for (let i = 1 + int(8); i > 0; i--) b[r() < 0.6 ? int(Math.min(b.length, 2048)) : int(b.length)] = int(256);
  } else if (fields.length > 0) {
    for (let i = 1 + int(2); i > 0; i--) {
      const [at, w] = fields[int(fields.length)];
      const width = Math.min(w, 6),
        off = at + w - width; // an EBML size may have 8 bytes: its low 6
      if (off + width > b.length) continue;
      const max = 2 ** (8 * width) - 1,
        was = b.readUIntBE(off, width);
      const values = [
        0,
        1,
        max,
        int(64),
        int(max + 1),
        Math.min(max, was + 1 + int(16)),
        Math.max(0, was - 1 - int(16)),
        Math.min(max, was * 2),
      ];
      b.writeUIntBE(values[int(values.length)], off, width);
    }
  }
  return r() < 0.3 ? cut(b) : b;
}

function chunks(b: Buffer, r: () => number): Buffer[] {
  const max = [64, 4096, 200_000][Math.floor(r() * 3)];
  const out: Buffer[] = [];
  for (let off = 0; off < b.length;) {
    const n = 1 + Math.floor(Math.pow(r(), 3) * max);
    out.push(b.subarray(off, off + n));
    off += n;
  }
  return out;
}

/** What went wrong (undefined: the case ended as it may), and the error id it ended with. */
async function runCase(s: Source, input: Buffer, r: () => number): Promise<{ failure?: string; id: string }> {
  const run = open(s.declared, { pace: 1000, maxBufferedBytes: 4 * 1024 * 1024 });
  const parts = chunks(input, r);
  const flushAt = r() < 0.3 ? Math.floor(r() * parts.length) : -1;
  try {
    for (let i = 0; i < parts.length; i++) {
      run.pipeline.push(parts[i]);
      if (i === flushAt) await sendHeld(run);
    }
    await sendHeld(run);
    run.pipeline.close();
  } catch (e) {
    return { failure: `threw ${(e as Error).stack}`, id: 'THROWN' };
  }
  const e = run.errors[0];
  const id = e?.id ?? 'none';
  if (run.errors.length > 1) return { failure: `${run.errors.length} errors: ${JSON.stringify(run.errors)}`, id };
  if (e && !ALLOWED.has(e.id)) return { failure: `${e.id}: ${e.details}`, id };
  // The pipeline's safety net (an unexpected exception while parsing) is not a precise answer.
  if (e && /could not be parsed/.test(e.details)) return { failure: `imprecise: ${e.details}`, id };
  const big = run.frames.find((f) => f.length > 64000);
  if (big) return { failure: `a frame of ${big.length} bytes`, id };
  return { id };
}

describe('hostile containers through the audio pipeline', () => {
  for (const s of sources()) {
    it(`${s.name}: truncated, mutated, sizes overwritten: only client-facing errors`, async () => {
      const r = prng(0x5eed ^ s.data.length);
      const fields = sizeFields(s.data);
      const failures: string[] = [];
      const ids: Record<string, number> = {};
      const n = s.transcoded ? TRANSCODED_CASES_PER_KIND : CASES_PER_KIND;
      for (let kind = 0; kind < 3; kind++) {
        for (let i = 0; i < n; i++) {
          const seed = Math.floor(r() * 2 ** 31);
          const cr = prng(seed);
          const input = variant(s.data, kind, cr, fields);
          const { failure, id } = await runCase(s, input, cr);
          ids[id] = (ids[id] ?? 0) + 1;
          if (failure) failures.push(`kind ${kind} seed ${seed}: ${failure}`);
        }
      }
      assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${3 * n} cases failed`);
      // The cases reach the parsers' checks (a structure to lie about is one that gets caught).
      if (fields.length > 0) assert.ok((ids.AUDIO_MALFORMED ?? 0) > 0, JSON.stringify(ids));
    });
  }
});
