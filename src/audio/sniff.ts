// Container family from the first bytes (magic numbers); the codec comes from the parser.

export type Container = 'webm' | 'ogg' | 'wav' | 'flac' | 'mp3' | 'mp4';
export type SniffResult = Container | 'more' | 'unknown';

/** Bytes needed to rule every magic in or out. */
export const SNIFF_BYTES = 12;

interface Magic {
  container: Container;
  test(b: Buffer, n: number): boolean | undefined;
}

/** `pattern` at `at`: true/false once enough bytes are there, undefined while a prefix still fits. */
function fixed(container: Container, at: number, pattern: number[]): Magic {
  return {
    container,
    test(b, n) {
      for (let i = 0; i < pattern.length; i++) {
        if (at + i >= n) return undefined;
        if (pattern[i] >= 0 && b[at + i] !== pattern[i]) return false;
      }
      return true;
    },
  };
}

const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

/** MPEG audio frame header: sync, a real layer, a real bitrate and sample rate. */
export function isMpegHeader(b: Buffer, off = 0): boolean {
  if (off + 4 > b.length) return false;
  if (b[off] !== 0xff || (b[off + 1] & 0xe0) !== 0xe0) return false;
  const version = (b[off + 1] >> 3) & 3,
    layer = (b[off + 1] >> 1) & 3;
  const bitrate = b[off + 2] >> 4,
    rate = (b[off + 2] >> 2) & 3;
  return version !== 1 && layer !== 0 && bitrate !== 0 && bitrate !== 15 && rate !== 3;
}

const MAGICS: Magic[] = [
  fixed('webm', 0, [0x1a, 0x45, 0xdf, 0xa3]),
  fixed('ogg', 0, ascii('OggS')),
  fixed('wav', 0, [...ascii('RIFF'), -1, -1, -1, -1, ...ascii('WAVE')]),
  fixed('flac', 0, ascii('fLaC')),
  fixed('mp3', 0, ascii('ID3')),
  fixed('mp4', 4, ascii('ftyp')),
  {
    container: 'mp3',
    test: (b, n) =>
      n < 4 ? (b[0] === 0xff && (n < 2 || (b[1] & 0xe0) === 0xe0) ? undefined : false) : isMpegHeader(b),
  },
];

export function sniff(b: Buffer): SniffResult {
  let pending = false;
  for (const m of MAGICS) {
    const r = m.test(b, b.length);
    if (r === true) return m.container;
    if (r === undefined) pending = true;
  }
  return pending ? 'more' : 'unknown';
}
