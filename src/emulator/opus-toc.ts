// Duration of one Opus packet from its TOC byte. Hand-written: it is a
// table lookup, and the Opus libraries decode audio rather than expose this.

/** Frame size in ms for each of the 32 TOC configurations. */
function frameMs(config: number): number {
  if (config < 12) return [10, 20, 40, 60][config % 4]; // SILK-only
  if (config < 16) return [10, 20][config % 2]; // Hybrid
  return [2.5, 5, 10, 20][config % 4]; // CELT-only
}

/** Packet duration in seconds; 0 for an empty or malformed packet. */
export function opusPacketSeconds(packet: Uint8Array): number {
  if (packet.length < 1) return 0;
  const toc = packet[0];
  const code = toc & 0x03;
  let frames: number;
  if (code === 0) frames = 1;
  else if (code === 3) {
    if (packet.length < 2) return 0;
    frames = packet[1] & 0x3f;
  } else frames = 2;
  return (frames * frameMs(toc >> 3)) / 1000;
}
