// Test support: the audio fixtures (copied from the shared set into test/fixtures) and
// reproducible "random" chunkings of them.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

export function fixture(name: string): Buffer {
  return readFileSync(join(FIXTURES, name));
}

/** A chrome/ folder's chunks in order: exactly what a browser's MediaRecorder sent. */
export function chromeChunks(folder: string): Buffer[] {
  const dir = join(FIXTURES, 'chrome', folder);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => readFileSync(join(dir, f)));
}

/** Mulberry32: the same "random" chunking on every run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `data` in chunks of `size` bytes, in order (the last one what is left). */
export function evenChunks(data: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off < data.length; off += size) out.push(data.subarray(off, off + size));
  return out;
}

/** Random chunks from 1 byte to maxChunk bytes (most small, some large). */
export function randomChunks(data: Buffer, seed: number, maxChunk = 200_000): Buffer[] {
  const r = prng(seed);
  const out: Buffer[] = [];
  for (let off = 0; off < data.length;) {
    const n = Math.max(1, Math.floor(Math.pow(r(), 3) * maxChunk));
    out.push(data.subarray(off, off + n));
    off += n;
  }
  return out;
}
