// Clips recorded by Debian's real Chromium: its fake microphone plays the clip's WAV (once), the page
// records it with MediaRecorder ('audio/webm;codecs=opus', 250 ms timeslice, getUserMedia's default
// processing on: echo cancellation, noise suppression, gain control), as a browser client does. One
// browser per clip, all at once (they record in real time). The recording starts a little after the
// microphone does: the lag is found by matching the recording's level envelope to the clip's.
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import * as L from '../../../test/audio/speech/labelled.js';
import { chromeChunks } from '../../../test/support/fixtures.js';

export interface Recording {
  clip: L.Clip;
  packets: Buffer[];
  /** Seconds of the clip already played when the recording started. */
  lag: number;
}

const PAGE = '<!doctype html><title>record</title>';

async function record(clip: L.Clip, wav: string, url: string): Promise<Buffer> {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: false, // the flag below asks for the new headless mode itself
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}%noloop`,
    ],
  });
  try {
    const page = await browser.newPage();
    await page.goto(url);
    const ms = Math.round((clip.samples.length / L.RATE) * 1000) + 1500;
    const b64 = await page.evaluate(async (ms: number) => {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      const rec = new MediaRecorder(stream, { mimeType: 'audio/webm;codecs=opus' });
      const chunks: Blob[] = [];
      rec.ondataavailable = (e) => chunks.push(e.data);
      const stopped = new Promise((r) => (rec.onstop = r));
      rec.start(250);
      await new Promise((r) => setTimeout(r, ms));
      rec.stop();
      await stopped;
      const buf = new Uint8Array(await new Blob(chunks).arrayBuffer());
      let s = '';
      for (let i = 0; i < buf.length; i += 0x8000) s += String.fromCharCode(...buf.subarray(i, i + 0x8000));
      return btoa(s);
    }, ms);
    return Buffer.from(b64, 'base64');
  } finally {
    await browser.close();
  }
}

/** 10 ms levels in dB (floored at -80). */
function envelope(s: Float32Array, rate: number): Float64Array {
  const n = rate / 100;
  const out = new Float64Array(Math.floor(s.length / n));
  for (let k = 0; k < out.length; k++) {
    let e = 0;
    for (let j = 0; j < n; j++) e += s[k * n + j] ** 2;
    out[k] = Math.max(-80, 10 * Math.log10(e / n + 1e-12));
  }
  return out;
}

/** The lag (seconds, -1 to 3) that best matches the recording's envelope to the clip's. */
function lagOf(rec: Float64Array, src: Float64Array): number {
  let best = 0;
  let bestScore = Infinity;
  for (let lag = -100; lag <= 300; lag++) {
    let d = 0;
    let n = 0;
    for (let i = 0; i < rec.length; i++) {
      const j = i + lag;
      if (j < 0 || j >= src.length) continue;
      d += Math.abs(rec[i] - src[j]);
      n++;
    }
    if (n > 100 && d / n < bestScore) [bestScore, best] = [d / n, lag];
  }
  return best / 100;
}

/** The fixture's own recording (test/fixtures/chrome/webm-opus: an older Chromium, VBR), the first 9 s of the fixture's speech. */
export async function fixtureRecording(speech: L.Clip, work: string): Promise<Recording> {
  const webm = Buffer.concat(chromeChunks('webm-opus'));
  const file = join(work, 'chromium-fixture.webm');
  writeFileSync(file, webm);
  const samples = await L.decodeFloat(file);
  const clip: L.Clip = {
    ...speech,
    name: 'speech (fixture, first 9 s)',
    speech: speech.speech.map(([a, b]) => [a, Math.min(b, samples.length / L.RATE)]),
  };
  return {
    clip,
    packets: await L.opusPackets(webm, 'webm'),
    lag: lagOf(envelope(samples, L.RATE), envelope(speech.samples, L.RATE)),
  };
}

export async function recordInChromium(clips: L.Clip[], work: string): Promise<Recording[]> {
  const server = createServer((_req, res) => res.end(PAGE));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  try {
    return await Promise.all(
      clips.map(async (clip, i) => {
        const wav = join(work, `chromium-${i}.wav`);
        L.writeWav(clip, wav);
        const webm = await record(clip, wav, url);
        const file = join(work, `chromium-${i}.webm`);
        writeFileSync(file, webm);
        const packets = await L.opusPackets(webm, 'webm');
        const lag = clip.speech.length
          ? lagOf(envelope(await L.decodeFloat(file), L.RATE), envelope(clip.samples, L.RATE))
          : 0;
        return { clip, packets, lag };
      }),
    );
  } finally {
    server.close();
  }
}
