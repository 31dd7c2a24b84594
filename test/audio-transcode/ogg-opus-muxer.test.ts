import { afterAll, beforeAll, test } from 'vitest';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import prism from 'prism-media';
import { createOggOpusMuxer, opusPacketSamples48 } from '../../src/audio/transcode/index.js';
import { chromeChunks, FIXTURES } from '../support/fixtures.js';
import { decodedSeconds48k, decodeTo16kMono, parseOggPages, probeDuration } from './ogg-check.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'muxer-test-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Opus packets and OpusHead of a WebM, demuxed by prism-media from the given chunks. */
async function webmPackets(chunks: Buffer[]): Promise<{ packets: Buffer[]; head: Buffer }> {
  const demuxer = new prism.opus.WebmDemuxer();
  const packets: Buffer[] = [];
  let head: Buffer | undefined;
  demuxer.on('head', (h: Buffer) => {
    head = h;
  });
  demuxer.on('data', (p: Buffer) => packets.push(p));
  const done = new Promise<void>((resolve, reject) => {
    demuxer.on('end', resolve);
    demuxer.on('error', reject);
  });
  for (const c of chunks) demuxer.write(c);
  demuxer.end();
  await done;
  assert.ok(head, 'webm has an OpusHead');
  return { packets, head };
}

async function remux(packets: Buffer[], head: Buffer, file: string, writeSize: number) {
  const muxer = createOggOpusMuxer({
    channels: head[9],
    inputSampleRate: head.readUInt32LE(12),
    preSkip: head.readUInt16LE(10),
  });
  const out = [muxer.header()];
  let media = 0;
  for (let i = 0; i < packets.length; i += writeSize) {
    const r = muxer.write(packets.slice(i, i + writeSize));
    out.push(r.data);
    media += r.mediaSeconds;
  }
  out.push(muxer.end());
  const ogg = Buffer.concat(out);
  await writeFile(file, ogg);
  return { ogg, media };
}

test('WebM Opus packets remuxed into Ogg: same duration as the WebM, decodes cleanly, valid CRCs', async () => {
  const webm = join(FIXTURES, 'dictation.webm');
  const { packets, head } = await webmPackets([await readFile(webm)]);
  const file = join(dir, 'remux.ogg');
  const { ogg, media } = await remux(packets, head, file, 12);

  const pages = parseOggPages(ogg);
  assert.ok(
    pages.every((p) => p.crcOk),
    'every page CRC is valid',
  );
  assert.equal(pages.at(-1)!.flags & 4, 4);
  const samples = packets.reduce((n, p) => n + opusPacketSamples48(p), 0);
  assert.equal(pages.at(-1)!.granule, BigInt(samples), 'final granule = all packet samples');
  assert.ok(Math.abs(media - samples / 48000) < 1e-9);

  const [oggDur, webmDur] = [await probeDuration(file), await probeDuration(webm)];
  assert.ok(Math.abs(oggDur - webmDur) < 0.04, `ogg ${oggDur}s vs webm ${webmDur}s`);
  const [oggDecoded, webmDecoded] = [await decodedSeconds48k(file), await decodedSeconds48k(webm)];
  assert.ok(Math.abs(oggDecoded - webmDecoded) < 0.04, `decoded ogg ${oggDecoded}s vs webm ${webmDecoded}s`);
  const { stderr, pcm } = await decodeTo16kMono(file);
  assert.equal(stderr, '');
  const ref = await decodeTo16kMono(webm);
  assert.ok(Math.abs(pcm.length - ref.pcm.length) <= 32 * 40, 'same amount of audio as the WebM decodes to');
});

test("Chromium's live WebM (60 ms packets, 250 ms chunks) remuxes into a valid Ogg of the same duration", async () => {
  const chunks = chromeChunks('webm-opus');
  const { packets, head } = await webmPackets(chunks);
  const file = join(dir, 'chrome.ogg');
  const { ogg } = await remux(packets, head, file, 4);
  assert.ok(parseOggPages(ogg).every((p) => p.crcOk));
  const whole = join(dir, 'chrome.webm');
  await writeFile(whole, Buffer.concat(chunks));
  const [oggDecoded, webmDecoded] = [await decodedSeconds48k(file), await decodedSeconds48k(whole)];
  assert.ok(Math.abs(oggDecoded - webmDecoded) < 0.04, `decoded ogg ${oggDecoded}s vs webm ${webmDecoded}s`);
  assert.equal((await decodeTo16kMono(file)).stderr, '');
});

test('pages: header pages first, at most 100 ms per audio page, lacing of 255-byte multiples round-trips', () => {
  const muxer = createOggOpusMuxer({ channels: 2, inputSampleRate: 44100 });
  const header = parseOggPages(muxer.header());
  assert.equal(header[0].flags, 2, 'BOS on the OpusHead page');
  const opusHead = header[0].packets[0];
  assert.equal(opusHead.toString('latin1', 0, 8), 'OpusHead');
  assert.deepEqual(
    [opusHead[8], opusHead[9], opusHead.readUInt16LE(10), opusHead.readUInt32LE(12), opusHead[18]],
    [1, 2, 312, 44100, 0],
  );
  assert.equal(header[1].packets[0].toString('latin1', 0, 8), 'OpusTags');

  // CELT 20 ms packets (TOC config 31 → 0xf8, code 0) of awkward sizes.
  const sizes = [0, 254, 255, 256, 510, 1275, 3, 7, 9, 1];
  const packets = sizes.map((n, i) => Buffer.concat([Buffer.from([0xf8]), Buffer.alloc(n, i + 1)]));
  const w = muxer.write(packets);
  assert.ok(Math.abs(w.mediaSeconds - 0.2) < 1e-9);
  const pages = parseOggPages(w.data);
  assert.equal(pages.length, 2, '10 × 20 ms → two 100 ms pages');
  assert.deepEqual(
    pages.map((p) => p.granule),
    [4800n, 9600n],
  );
  assert.deepEqual(
    pages.flatMap((p) => p.packets),
    packets,
  );
  assert.ok(pages.every((p) => p.crcOk));
  assert.deepEqual(
    [...header, ...pages].map((p) => p.sequence),
    [0, 1, 2, 3],
  );
  const eos = parseOggPages(muxer.end());
  assert.equal(eos[0].flags, 4);
  assert.equal(eos[0].granule, 9600n);
});

test("an Opus packet's samples come from its TOC byte: the frame duration of its config times its frame count", () => {
  assert.equal(opusPacketSamples48(Buffer.from([0x08])), 960); // SILK NB 20 ms, 1 frame
  assert.equal(opusPacketSamples48(Buffer.from([0x18])), 2880); // SILK NB 60 ms
  assert.equal(opusPacketSamples48(Buffer.from([0x79])), 1920); // Hybrid FB 20 ms, 2 frames
  assert.equal(opusPacketSamples48(Buffer.from([0xeb, 0x06])), 6 * 240); // CELT FB 5 ms (config 29), code 3, 6 frames
  assert.throws(() => opusPacketSamples48(Buffer.alloc(0)), RangeError);
});
