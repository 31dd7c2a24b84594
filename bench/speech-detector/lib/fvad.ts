// The PCM path: the clip at 16 kHz s16 (ffmpeg resamples the 48 kHz WAV) through PcmSpeech (the
// WebRTC VAD in WASM) into a SpeechDetector; scored, and its CPU per audio second.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { SpeechDetector } from '../../../src/audio/index.js';
import { PcmSpeech } from './pcm-vad.js';
import type { Clip } from '../../../test/audio/speech/labelled.js';
import { score, type Score } from '../../../test/audio/speech/score.js';

const run = promisify(execFile);

async function pcm16k(wav: string): Promise<Int16Array> {
  const { stdout } = await run(
    'ffmpeg',
    ['-v', 'error', '-i', wav, '-f', 's16le', '-ar', '16000', '-ac', '1', 'pipe:1'],
    {
      encoding: 'buffer',
      maxBuffer: 1 << 30,
    },
  );
  return new Int16Array(stdout.buffer.slice(stdout.byteOffset, stdout.byteOffset + stdout.length));
}

export async function fvadClip(wav: string, clip: Clip): Promise<{ s: Score; cpuUs: number }> {
  const samples = await pcm16k(wav);
  const once = async () => {
    const d = new SpeechDetector({ maxStretches: 4096 });
    const v = await PcmSpeech.create(d, 16000);
    // In pieces of 250 ms, as a client sends them.
    for (let at = 0; at < samples.length; at += 4000) v.push(samples.subarray(at, at + 4000));
    v.close();
    return d;
  };
  const d = await once();
  const seconds = samples.length / 16000;
  let reps = 0;
  const t0 = process.cpuUsage();
  let used = 0;
  while (used < 300_000 || reps < 2) {
    await once();
    reps++;
    const u = process.cpuUsage(t0);
    used = u.user + u.system;
  }
  return { s: score(clip.speech, d.stretches(), seconds), cpuUs: used / (reps * seconds) };
}
