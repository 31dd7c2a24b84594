// Recognises the container from the first bytes of the first binary frame (magic numbers only).

export type Container = 'ogg' | 'webm' | 'mp3' | 'flac' | 'mp4' | 'unknown';

export function sniffContainer(b: Uint8Array): Container {
  const ascii = (at: number, s: string) => s.split('').every((c, i) => b[at + i] === c.charCodeAt(0));
  if (ascii(0, 'OggS')) return 'ogg';
  if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'webm';
  if (ascii(0, 'fLaC')) return 'flac';
  if (ascii(4, 'ftyp')) return 'mp4';
  if (ascii(0, 'ID3')) return 'mp3';
  if (b[0] === 0xff && (b[1] & 0xe0) === 0xe0) return 'mp3'; // MPEG audio frame sync
  return 'unknown';
}
