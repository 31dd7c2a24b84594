// The Opus packets a parser finds as it reads (what the speech detector judges): every packet of a
// live Chromium WebM stream and of an opusenc Ogg stream, in order, each with its media time, fed in
// the pieces a client sends; the same packets prism-media's demuxers extract.
import assert from 'node:assert/strict';
import prism from 'prism-media';
import { describe, it } from 'vitest';
import { OggParser, WebmParser } from '../../src/audio/containers/index.js';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';

type Seen = { packet: Buffer; start: number; duration: number };

function demuxed(stream: Buffer, kind: 'webm' | 'ogg'): Promise<Buffer[]> {
  const demux = kind === 'webm' ? new prism.opus.WebmDemuxer() : new prism.opus.OggDemuxer();
  const out: Buffer[] = [];
  demux.on('data', (p: Buffer) => out.push(p));
  return new Promise((resolve) => {
    demux.on('end', () => resolve(out));
    demux.end(stream);
  });
}

function parsed(pieces: Buffer[], kind: 'webm' | 'ogg'): Seen[] {
  const seen: Seen[] = [];
  const sink = (b: Buffer, off: number, len: number, start: number, duration: number) =>
    seen.push({ packet: Buffer.from(b.subarray(off, off + len)), start, duration });
  const parser = kind === 'webm' ? new WebmParser({ runSeconds: 0.125, onPacket: sink }) : new OggParser(sink);
  for (const p of pieces) parser.push(p);
  return seen;
}

describe('Opus packets found while parsing', () => {
  it("a live Chromium WebM stream's packets, in its 250 ms pieces: each with its 60 ms", async () => {
    const pieces = chromeChunks('webm-opus');
    const seen = parsed(pieces, 'webm');
    assert.deepEqual(
      seen.map((s) => s.packet),
      await demuxed(Buffer.concat(pieces), 'webm'),
    );
    assert.ok(seen.every((s, i) => Math.abs(s.duration - 0.06) < 1e-9 && Math.abs(s.start - i * 0.06) < 0.002));
  });

  it("an Ogg stream's packets, fed 1,000 bytes at a time: in order, their times adding up to the stream's", async () => {
    const ogg = fixture('dictation.ogg');
    const seen = parsed(evenChunks(ogg, 1000), 'ogg');
    assert.deepEqual(
      seen.map((s) => s.packet),
      await demuxed(ogg, 'ogg'), // OpusHead and OpusTags are the demuxer's events, not packets
    );
    for (let i = 1; i < seen.length; i++)
      assert.ok(Math.abs(seen[i].start - (seen[i - 1].start + seen[i - 1].duration)) < 1e-6, `packet ${i} follows`);
    const last = seen.at(-1)!;
    assert.ok(last.start + last.duration > 25, `about 26 s: ${last.start + last.duration}`);
  });
});
