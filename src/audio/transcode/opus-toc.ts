// Duration of an Opus packet from its TOC byte and frame count.

/** Samples at 48 kHz of one frame for each of the 32 TOC configurations. */
function frameSamples48(config: number): number {
  if (config < 12) return [480, 960, 1920, 2880][config & 3]; // SILK: 10/20/40/60 ms
  if (config < 16) return [480, 960][config & 1]; // Hybrid: 10/20 ms
  return [120, 240, 480, 960][config & 3]; // CELT: 2.5/5/10/20 ms
}

/** 48 kHz samples the packet decodes to; throws on a packet too short to say. */
export function opusPacketSamples48(packet: Uint8Array): number {
  if (packet.length < 1) throw new RangeError('empty Opus packet');
  const toc = packet[0];
  const per = frameSamples48(toc >> 3);
  const code = toc & 3;
  let frames: number;
  if (code === 0) frames = 1;
  else if (code === 1 || code === 2) frames = 2;
  else {
    if (packet.length < 2) throw new RangeError('Opus code-3 packet without frame count');
    frames = packet[1] & 0x3f;
  }
  const samples = per * frames;
  if (samples > 5760) throw new RangeError(`Opus packet longer than 120 ms (${samples} samples)`);
  return samples;
}
