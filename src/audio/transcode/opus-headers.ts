// OpusHead and OpusTags identification packets.

export const OPUS_VENDOR = 'speech-gateway (libopus via @discordjs/opus)';

/** libopus lookahead for APPLICATION_AUDIO/VOIP is Fs/400 + Fs/250 = 6.5 ms at any rate: 312 at 48 kHz
 * (the muxer's default for remuxed streams that do not say; our encoder's is ENCODER_PRE_SKIP). */
export const LIBOPUS_PRE_SKIP = 312;

export function opusHead(o: { channels: number; preSkip: number; inputSampleRate: number }): Buffer {
  if (o.channels < 1 || o.channels > 2)
    throw new RangeError(`Opus mapping family 0 carries 1 or 2 channels, got ${o.channels}`);
  const b = Buffer.alloc(19);
  b.write('OpusHead', 0, 'latin1');
  b[8] = 1; // version
  b[9] = o.channels;
  b.writeUInt16LE(o.preSkip, 10);
  b.writeUInt32LE(o.inputSampleRate >>> 0, 12);
  b.writeInt16LE(0, 16); // output gain
  b[18] = 0; // mapping family 0: mono or stereo, no table
  return b;
}

export function opusTags(vendor = OPUS_VENDOR): Buffer {
  const v = Buffer.from(vendor, 'utf8');
  const b = Buffer.alloc(8 + 4 + v.length + 4);
  b.write('OpusTags', 0, 'latin1');
  b.writeUInt32LE(v.length, 8);
  v.copy(b, 12);
  b.writeUInt32LE(0, 12 + v.length); // no user comments
  return b;
}
