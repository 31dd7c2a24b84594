// Test-side Ogg reader: an independent (bitwise, table-free) CRC and page parser used to check
// what the muxer writes, without reusing any of the code under test.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { prng } from '../support/fixtures.js';

export const run = promisify(execFile);

export interface ParsedPage {
  flags: number;
  granule: bigint;
  serial: number;
  sequence: number;
  crcOk: boolean;
  packets: Buffer[];
}

function crcBitwise(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 24;
    for (let b = 0; b < 8; b++) crc = crc & 0x80000000 ? ((crc << 1) ^ 0x04c11db7) >>> 0 : (crc << 1) >>> 0;
  }
  return crc >>> 0;
}

export function parseOggPages(buf: Buffer): ParsedPage[] {
  const pages: ParsedPage[] = [];
  let off = 0;
  while (off < buf.length) {
    if (buf.toString('latin1', off, off + 4) !== 'OggS') throw new Error(`no capture pattern at ${off}`);
    const nseg = buf[off + 26];
    const lacing = buf.subarray(off + 27, off + 27 + nseg);
    const bodyLen = lacing.reduce((a, b) => a + b, 0);
    const end = off + 27 + nseg + bodyLen;
    const page = Buffer.from(buf.subarray(off, end));
    const stored = page.readUInt32LE(22);
    page.writeUInt32LE(0, 22);
    const packets: Buffer[] = [];
    let cur = 0;
    let start = off + 27 + nseg;
    for (const l of lacing) {
      cur += l;
      if (l < 255) {
        packets.push(buf.subarray(start, start + cur));
        start += cur;
        cur = 0;
      }
    }
    if (cur > 0) throw new Error('packet continues past page (muxer should not do that)');
    pages.push({
      flags: buf[off + 5],
      granule: buf.readBigInt64LE(off + 6),
      serial: buf.readUInt32LE(off + 14),
      sequence: buf.readUInt32LE(off + 18),
      crcOk: crcBitwise(page) === stored,
      packets,
    });
    off = end;
  }
  return pages;
}

/** Duration (s) ffprobe reports for a file's container. */
export async function probeDuration(file: string): Promise<number> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file]);
  return Number(stdout.trim());
}

export async function probeChannels(file: string): Promise<number> {
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'a:0',
    '-show_entries',
    'stream=channels',
    '-of',
    'csv=p=0',
    file,
  ]);
  return Number(stdout.trim());
}

/** Decodes with ffmpeg to mono 16 kHz s16le; fails if ffmpeg prints any error. */
export async function decodeTo16kMono(file: string): Promise<{ pcm: Buffer; stderr: string }> {
  const { stdout, stderr } = await run(
    'ffmpeg',
    ['-v', 'error', '-i', file, '-f', 's16le', '-ar', '16000', '-ac', '1', 'pipe:1'],
    {
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  return { pcm: stdout as unknown as Buffer, stderr: stderr.toString() };
}

/** Exact decoded duration: ffmpeg's decoder output at 48 kHz (pre-skip and end trim applied). */
export async function decodedSeconds48k(file: string): Promise<number> {
  const { stdout } = await run(
    'ffmpeg',
    ['-v', 'error', '-i', file, '-f', 's16le', '-ar', '48000', '-ac', '1', 'pipe:1'],
    {
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  return (stdout as unknown as Buffer).length / 2 / 48000;
}

/** RMS of each whole second of 16 kHz mono s16le. */
export function rmsPerSecond(pcm: Buffer): number[] {
  const out: number[] = [];
  for (let s = 0; (s + 1) * 32000 <= pcm.length; s++) {
    let sum = 0;
    for (let i = 0; i < 16000; i++) {
      const v = pcm.readInt16LE(s * 32000 + i * 2);
      sum += v * v;
    }
    out.push(Math.sqrt(sum / 16000));
  }
  return out;
}

export function correlation(a: number[], b: number[]): number {
  const n = Math.min(a.length, b.length);
  const ma = a.slice(0, n).reduce((x, y) => x + y, 0) / n;
  const mb = b.slice(0, n).reduce((x, y) => x + y, 0) / n;
  let num = 0,
    da = 0,
    db = 0;
  for (let i = 0; i < n; i++) {
    num += (a[i] - ma) * (b[i] - mb);
    da += (a[i] - ma) ** 2;
    db += (b[i] - mb) ** 2;
  }
  return num / Math.sqrt(da * db);
}

/** Splits into chunks of 1 byte to 64 KB, log-uniform so tiny and large chunks both occur. */
export function randomChunks(buf: Buffer, seed: number): Buffer[] {
  const rnd = prng(seed);
  const out: Buffer[] = [];
  for (let off = 0; off < buf.length;) {
    const n = Math.max(1, Math.floor(Math.exp(rnd() * Math.log(65536))));
    out.push(buf.subarray(off, off + n));
    off += n;
  }
  return out;
}
