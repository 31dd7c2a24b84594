// CPU of the detector alone: its packet() calls over packets already in memory, repeated until
// about half a second of CPU is spent, as process CPU time (user + system) per audio second.
import { opusPacketSamples48 } from '../../../src/audio/transcode/index.js';
import { SpeechDetector } from '../../../src/audio/index.js';

export function cpuPerAudioSecond(packets: Uint8Array[], seconds: number): number {
  const durations = packets.map((p) => {
    try {
      return opusPacketSamples48(p) / 48000;
    } catch {
      return 0;
    }
  });
  const once = () => {
    const d = new SpeechDetector();
    let t = 0;
    for (let i = 0; i < packets.length; i++) {
      d.packet(packets[i], t, durations[i]);
      t += durations[i];
    }
    return d.speechSeconds;
  };
  for (let i = 0; i < 3; i++) once(); // warm the JIT
  let reps = 0;
  const t0 = process.cpuUsage();
  let used = 0;
  while (used < 500_000 || reps < 3) {
    once();
    reps++;
    const u = process.cpuUsage(t0);
    used = u.user + u.system;
  }
  return used / (reps * seconds);
}
