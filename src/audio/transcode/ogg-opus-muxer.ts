// Whole Opus packets → Ogg Opus pages, hand-written: there is no well-kept npm Ogg
// writer for Opus (see ogg-page.ts). Pages are cut at most every `maxPageMs` (default 100 ms, at
// least one packet each) and every write() flushes: nothing is held back, so latency stays at the
// caller's chunking, and the re-chunker can cut at page boundaries to within 100 ms of its 250 ms
// target. 100 ms pages cost ~28 header bytes per 100 ms (~2 kb/s), against ~11 kb/s for one page
// per 20 ms packet.
import { randomInt } from 'node:crypto';
import { lacingCount, MAX_SEGMENTS, PAGE_BOS, PAGE_EOS, writePage } from './ogg-page.js';
import { LIBOPUS_PRE_SKIP, opusHead, opusTags } from './opus-headers.js';
import { opusPacketSamples48 } from './opus-toc.js';

export interface OggOpusMuxerOptions {
  channels: number;
  /** Informational rate written in OpusHead (the rate the audio had before encoding). */
  inputSampleRate: number;
  /** 48 kHz samples the decoder drops at the start; default 312 (libopus lookahead). */
  preSkip?: number;
  /** Longest audio one page carries; default 100. */
  maxPageMs?: number;
}

export interface OggOpusMuxer {
  /** OpusHead + OpusTags pages; call once, first. */
  header(): Buffer;
  /** Whole Opus packets → Ogg pages; mediaSeconds is their duration from each TOC byte. */
  write(packets: Buffer[]): { data: Buffer; mediaSeconds: number };
  /**
   * The EOS page. With `packets`, they go on the final page(s); with `endGranule` (48 kHz samples,
   * pre-skip included) the final granule trims the decoded end to it.
   */
  end(o?: { packets?: Buffer[]; endGranule?: number }): Buffer;
  /** 48 kHz samples of all packets written so far (pre-skip included). */
  readonly granule: number;
}

export function createOggOpusMuxer(o: OggOpusMuxerOptions): OggOpusMuxer {
  const serial = randomInt(0, 0xffffffff);
  const preSkip = o.preSkip ?? LIBOPUS_PRE_SKIP;
  const maxPageSamples = Math.max(1, Math.round(((o.maxPageMs ?? 100) * 48000) / 1000));
  let sequence = 0;
  let granule = 0;
  let headerDone = false;
  let ended = false;

  function page(flags: number, gran: bigint, packets: Buffer[]): Buffer {
    return writePage({ flags, granule: gran, serial, sequence: sequence++, packets });
  }

  /** Pages for `packets`; the last one gets `lastFlags` and, if given, `lastGranule`. */
  function pages(packets: Buffer[], lastFlags = 0, lastGranule?: number): { data: Buffer; samples: number } {
    if (!headerDone) throw new Error('OggOpusMuxer: header() must come first');
    if (ended) throw new Error('OggOpusMuxer: write after end()');
    const out: Buffer[] = [];
    let cur: Buffer[] = [];
    let curSamples = 0;
    let curSegments = 0;
    let total = 0;
    const flush = (last: boolean) => {
      const g = last && lastGranule !== undefined ? Math.min(lastGranule, granule) : granule;
      out.push(page(last ? lastFlags : 0, BigInt(g), cur));
      cur = [];
      curSamples = 0;
      curSegments = 0;
    };
    for (const pkt of packets) {
      const n = opusPacketSamples48(pkt);
      const segs = lacingCount(pkt.length);
      if (cur.length > 0 && (curSamples + n > maxPageSamples || curSegments + segs > MAX_SEGMENTS)) flush(false);
      cur.push(pkt);
      curSamples += n;
      curSegments += segs;
      granule += n;
      total += n;
    }
    if (cur.length > 0 || lastFlags) flush(true);
    return { data: Buffer.concat(out), samples: total };
  }

  return {
    header() {
      if (headerDone) throw new Error('OggOpusMuxer: header() twice');
      headerDone = true;
      const head = page(PAGE_BOS, 0n, [
        opusHead({ channels: o.channels, preSkip, inputSampleRate: o.inputSampleRate }),
      ]);
      return Buffer.concat([head, page(0, 0n, [opusTags()])]);
    },
    write(packets) {
      if (packets.length === 0) return { data: Buffer.alloc(0), mediaSeconds: 0 };
      const r = pages(packets);
      return { data: r.data, mediaSeconds: r.samples / 48000 };
    },
    end(e) {
      const r = pages(e?.packets ?? [], PAGE_EOS, e?.endGranule);
      ended = true;
      return r.data;
    },
    get granule() {
      return granule;
    },
  };
}
