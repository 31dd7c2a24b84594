// Ogg page writer, hand-written: npm has Ogg demuxers (prism-media) but no well-kept
// Ogg *writer* for Opus, and a page is 27 bytes of header plus lacing, so a library buys little.

const CRC_TABLE = (() => {
  // CRC-32 as Ogg defines it: polynomial 0x04C11DB7, no reflection, init 0, no final xor.
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let b = 0; b < 8; b++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    t[i] = r >>> 0;
  }
  return t;
})();

export function oggCrc32(bytes: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ bytes[i]) & 0xff]) >>> 0;
  return crc >>> 0;
}

export const PAGE_CONTINUED = 0x01;
export const PAGE_BOS = 0x02;
export const PAGE_EOS = 0x04;

/** Largest payload one page can carry: 255 lacing values of 255 bytes. */
export const MAX_SEGMENTS = 255;

export interface PageFields {
  flags: number;
  /** Granule position; -1n when no packet ends on this page. */
  granule: bigint;
  serial: number;
  sequence: number;
  packets: Buffer[];
}

/** Lacing values a packet needs: floor(len/255) values of 255 and one terminating value < 255. */
export function lacingCount(packetLength: number): number {
  return Math.floor(packetLength / 255) + 1;
}

/** One page holding whole packets (the caller keeps them within MAX_SEGMENTS lacing values). */
export function writePage(p: PageFields): Buffer {
  const lacing: number[] = [];
  let bodyLength = 0;
  for (const pkt of p.packets) {
    let n = pkt.length;
    while (n >= 255) {
      lacing.push(255);
      n -= 255;
    }
    lacing.push(n);
    bodyLength += pkt.length;
  }
  if (lacing.length > MAX_SEGMENTS) throw new RangeError(`ogg page needs ${lacing.length} lacing values (max 255)`);
  const page = Buffer.alloc(27 + lacing.length + bodyLength);
  page.write('OggS', 0, 'latin1');
  page[4] = 0; // stream structure version
  page[5] = p.flags;
  page.writeBigInt64LE(p.granule, 6);
  page.writeUInt32LE(p.serial >>> 0, 14);
  page.writeUInt32LE(p.sequence >>> 0, 18);
  // bytes 22..25: CRC, zero while computing
  page[26] = lacing.length;
  for (let i = 0; i < lacing.length; i++) page[27 + i] = lacing[i];
  let off = 27 + lacing.length;
  for (const pkt of p.packets) {
    pkt.copy(page, off);
    off += pkt.length;
  }
  page.writeUInt32LE(oggCrc32(page), 22);
  return page;
}
