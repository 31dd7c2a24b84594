// The baseline the detector is measured against: speech from packet sizes alone (a VBR encoder
// spends more bytes on speech than on silence), a packet being speech when its bytes per second stand
// a margin above the lowest of the last 2 s. The TOC byte alone says nothing (a CELT stream's
// configuration never changes with the content).
import { opusPacketSamples48 } from '../../../src/audio/transcode/index.js';
import { SpeechDetector } from '../../../src/audio/index.js';
import { LevelFloor } from '../../../src/audio/speech/level-floor.js';

export function sizeBaseline(
  packets: Uint8Array[],
  marginDb = 1,
): { stretches: Array<[number, number]>; seconds: number } {
  const d = new SpeechDetector({ maxStretches: 4096 });
  const floor = new LevelFloor({ marginDb, floorSeconds: 2, minLevelDb: -Infinity });
  let t = 0;
  for (const p of packets) {
    let s: number;
    try {
      s = opusPacketSamples48(p) / 48000;
    } catch {
      continue;
    }
    d.decision(t, s, floor.frame(10 * Math.log10(p.length / s), s));
    t += s;
  }
  return { stretches: d.stretches(), seconds: t };
}
