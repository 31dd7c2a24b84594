import { afterAll, beforeAll, test } from 'vitest';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createPcmToOpus,
  createEncoderPool,
  closeDefaultEncoderPool,
  type PcmFormat,
  type TranscodeMode,
} from '../../src/audio/transcode/index.js';
import {
  correlation,
  decodedSeconds48k,
  decodeTo16kMono,
  parseOggPages,
  probeChannels,
  probeDuration,
  randomChunks,
  rmsPerSecond,
  run,
} from './ogg-check.js';
import { FIXTURES } from '../support/fixtures.js';
import { SPEECH_BOUNDS, speechDistance } from './speech-check.js';

const FIXTURE = join(FIXTURES, 'dictation-16k-s16le.pcm');
const WAV44 = join(FIXTURES, 'dictation-44k1.wav');
let dir: string;
let referenceRms: number[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'transcode-test-'));
  referenceRms = rmsPerSecond(await readFile(FIXTURE));
});
afterAll(async () => {
  await closeDefaultEncoderPool();
  await rm(dir, { recursive: true, force: true });
});

/** The samples of a WAV file: this fixture has a LIST chunk, so the data does not start at byte 44. */
function wavData(wav: Buffer): Buffer {
  for (let off = 12; off + 8 <= wav.length;) {
    const size = wav.readUInt32LE(off + 4);
    if (wav.toString('latin1', off, off + 4) === 'data') return wav.subarray(off + 8, off + 8 + size);
    off += 8 + size + (size & 1);
  }
  throw new Error('no data chunk');
}

/** The 16 kHz fixture converted by ffmpeg to another raw PCM layout. */
async function convert(f: PcmFormat, extraArgs: string[] = []): Promise<Buffer> {
  const { stdout } = await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-f',
      's16le',
      '-ar',
      '16000',
      '-ac',
      '1',
      '-i',
      FIXTURE,
      ...extraArgs,
      '-ar',
      String(f.sampleRate),
      '-ac',
      String(f.channels),
      '-f',
      f.encoding,
      'pipe:1',
    ],
    { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout as unknown as Buffer;
}

async function transcode(pcm: Buffer, format: PcmFormat, mode: TranscodeMode, seed: number, bitrate?: number) {
  const t = createPcmToOpus(format, { mode, bitrate });
  const chunks: Buffer[] = [];
  let media = 0;
  for (const c of randomChunks(pcm, seed)) {
    const r = await t.push(c);
    chunks.push(r.data);
    media += r.mediaSeconds;
  }
  const r = await t.end();
  chunks.push(r.data);
  media += r.mediaSeconds;
  return { chunks, media, transcodeSeconds: t.transcodeSeconds };
}

const cases: { name: string; format: PcmFormat; pcm: () => Promise<Buffer>; modes: TranscodeMode[] }[] = [
  {
    name: '16 kHz mono s16le',
    format: { sampleRate: 16000, channels: 1, encoding: 's16le' },
    pcm: () => readFile(FIXTURE),
    modes: ['inline', 'pool'],
  },
  {
    name: '44.1 kHz mono s16le (resampled)',
    format: { sampleRate: 44100, channels: 1, encoding: 's16le' },
    pcm: async () => wavData(await readFile(WAV44)),
    modes: ['inline', 'pool'],
  },
  {
    name: '48 kHz stereo s16le',
    format: { sampleRate: 48000, channels: 2, encoding: 's16le' },
    pcm: () => convert({ sampleRate: 48000, channels: 2, encoding: 's16le' }, ['-af', 'pan=stereo|c0=c0|c1=0.5*c0']),
    modes: ['pool'],
  },
  {
    name: '16 kHz mono s16be',
    format: { sampleRate: 16000, channels: 1, encoding: 's16be' },
    pcm: () => convert({ sampleRate: 16000, channels: 1, encoding: 's16be' }),
    modes: ['inline'],
  },
  {
    name: '22.05 kHz mono f32le (resampled)',
    format: { sampleRate: 22050, channels: 1, encoding: 'f32le' },
    pcm: () => convert({ sampleRate: 22050, channels: 1, encoding: 'f32le' }),
    modes: ['pool'],
  },
  {
    name: '11.025 kHz stereo s16le (resampled to 16 kHz)',
    format: { sampleRate: 11025, channels: 2, encoding: 's16le' },
    pcm: () => convert({ sampleRate: 11025, channels: 2, encoding: 's16le' }),
    modes: ['inline'],
  },
];

let seed = 1;
for (const c of cases) {
  for (const mode of c.modes) {
    const s = seed++;
    test(`${c.name}, ${mode}: ffmpeg decodes the same speech with the input's duration`, async () => {
      const pcm = await c.pcm();
      const bytesPerFrame = (c.format.encoding === 'f32le' ? 4 : 2) * c.format.channels;
      const inputSeconds = pcm.length / bytesPerFrame / c.format.sampleRate;
      const { chunks, media } = await transcode(pcm, c.format, mode, s);

      // Each push's output is whole pages, so the re-chunker can cut between any two of them.
      for (const ch of chunks) if (ch.length) parseOggPages(ch);
      assert.equal(chunks[0].toString('latin1', 0, 4), 'OggS');
      assert.ok(Math.abs(media - inputSeconds) < 0.001, `reported media ${media} vs input ${inputSeconds}`);

      const ogg = Buffer.concat(chunks);
      const pages = parseOggPages(ogg);
      assert.ok(
        pages.every((p) => p.crcOk),
        'every page CRC is valid',
      );
      assert.equal(pages[0].packets[0].toString('latin1', 0, 8), 'OpusHead');
      assert.equal(pages[0].packets[0][9], c.format.channels);
      assert.equal(pages[0].packets[0].readUInt32LE(12), c.format.sampleRate);
      assert.equal(pages[1].packets[0].toString('latin1', 0, 8), 'OpusTags');
      assert.equal(pages.at(-1)!.flags & 4, 4, 'last page has EOS');
      pages.forEach((p, i) => assert.equal(p.sequence, i));

      const file = join(dir, `out-${s}.ogg`);
      await writeFile(file, ogg);
      const decoded = await decodedSeconds48k(file);
      assert.ok(Math.abs(decoded - inputSeconds) < 0.04, `decoded ${decoded}s vs input ${inputSeconds}s`);
      const probed = await probeDuration(file);
      assert.ok(Math.abs(probed - inputSeconds) < 0.04, `ffprobe ${probed}s vs input ${inputSeconds}s`);
      assert.equal(await probeChannels(file), c.format.channels);

      const { pcm: pcm16, stderr } = await decodeTo16kMono(file);
      assert.equal(stderr, '', 'ffmpeg reports no errors');
      const r = correlation(referenceRms, rmsPerSecond(pcm16));
      assert.ok(r > 0.9, `RMS-per-second correlation with the input ${r.toFixed(3)} > 0.9`);
    });
  }
}

test('a tiny push yields the headers and no audio; sub-frame input still ends as a valid file', async () => {
  const t = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { mode: 'inline' });
  const first = await t.push(Buffer.from([1])); // half a sample
  assert.equal(first.mediaSeconds, 0);
  const pages = parseOggPages(first.data);
  assert.deepEqual(
    pages.map((p) => p.packets[0].toString('latin1', 0, 8)),
    ['OpusHead', 'OpusTags'],
  );
  const second = await t.push(Buffer.alloc(319)); // completes 160 samples (10 ms), less than a frame
  assert.equal(second.data.length, 0);
  const end = await t.end();
  assert.ok(Math.abs(end.mediaSeconds - 0.01) < 1e-9);
  const file = join(dir, 'tiny.ogg');
  await writeFile(file, Buffer.concat([first.data, end.data]));
  assert.ok(Math.abs((await decodedSeconds48k(file)) - 0.01) < 0.001);
});

test('rejects PCM with more than two channels', () => {
  assert.throws(() => createPcmToOpus({ sampleRate: 16000, channels: 4, encoding: 's16le' }), RangeError);
});

test('40 and 60 ms frames give the right duration too', async () => {
  const pcm = (await readFile(FIXTURE)).subarray(0, 16000 * 2 * 3 + 222);
  for (const frameMs of [40, 60] as const) {
    const t = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { frameMs, mode: 'pool' });
    const out = [(await t.push(pcm)).data, (await t.end()).data];
    const file = join(dir, `frame-${frameMs}.ogg`);
    await writeFile(file, Buffer.concat(out));
    assert.ok(Math.abs((await decodedSeconds48k(file)) - 111 / 16000 - 3) < 0.001);
  }
});

test('a pooled stream closed without end() releases its worker and others keep working', async () => {
  const a = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { mode: 'pool' });
  await a.push(Buffer.alloc(16000));
  a.close();
  await assert.rejects(a.push(Buffer.alloc(2)));
  const b = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { mode: 'pool' });
  const r = await b.push(Buffer.alloc(16000));
  assert.ok(r.mediaSeconds > 0.4);
  await b.end();
});

test('two streams interleaved on one pool worker keep separate encoder state', async () => {
  const pool = createEncoderPool({ threads: 1 });
  try {
    const pcm = await readFile(FIXTURE);
    const silence = Buffer.alloc(pcm.length);
    const speech = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { pool });
    const quiet = createPcmToOpus({ sampleRate: 16000, channels: 1, encoding: 's16le' }, { pool });
    const out: [Buffer[], Buffer[]] = [[], []];
    for (let off = 0; off < pcm.length; off += 8000) {
      // Both in flight at once on the same worker.
      const [a, b] = await Promise.all([
        speech.push(pcm.subarray(off, off + 8000)),
        quiet.push(silence.subarray(off, off + 8000)),
      ]);
      out[0].push(a.data);
      out[1].push(b.data);
    }
    const [ea, eb] = await Promise.all([speech.end(), quiet.end()]);
    out[0].push(ea.data);
    out[1].push(eb.data);
    const files = [join(dir, 'pinned-speech.ogg'), join(dir, 'pinned-silence.ogg')];
    await writeFile(files[0], Buffer.concat(out[0]));
    await writeFile(files[1], Buffer.concat(out[1]));
    const speechPcm = (await decodeTo16kMono(files[0])).pcm;
    assert.ok(correlation(referenceRms, rmsPerSecond(speechPcm)) > 0.9);
    const quietRms = rmsPerSecond((await decodeTo16kMono(files[1])).pcm);
    assert.ok(Math.max(...quietRms) < 50, `silent stream stays silent (max RMS ${Math.max(...quietRms)})`);
  } finally {
    await pool.close();
  }
});

test('at the encoder settings the decoded audio keeps the speech (log-mel distance, SNR); 8 kb/s would not', async () => {
  const pcm = await readFile(FIXTURE);
  const decode = async (bitrate?: number) => {
    const { chunks } = await transcode(
      pcm,
      { sampleRate: 16000, channels: 1, encoding: 's16le' },
      'inline',
      99,
      bitrate,
    );
    const file = join(dir, `speech-${bitrate ?? 'default'}.ogg`);
    await writeFile(file, Buffer.concat(chunks));
    return (await decodeTo16kMono(file)).pcm;
  };
  const ours = speechDistance(pcm, await decode());
  assert.ok(
    ours.logMelDb <= SPEECH_BOUNDS.maxLogMelDb,
    `log-mel distance ${ours.logMelDb.toFixed(2)} dB ≤ ${SPEECH_BOUNDS.maxLogMelDb}`,
  );
  assert.ok(
    ours.snrDb >= SPEECH_BOUNDS.minSnrDb,
    `SNR ${ours.snrDb.toFixed(1)} dB ≥ ${SPEECH_BOUNDS.minSnrDb} (also fails if the pre-skip is wrong)`,
  );
  const starved = speechDistance(pcm, await decode(8000));
  assert.ok(
    starved.logMelDb > SPEECH_BOUNDS.maxLogMelDb,
    `8 kb/s: log-mel distance ${starved.logMelDb.toFixed(2)} dB is out of bounds`,
  );
});
