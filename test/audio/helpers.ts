// Shared test helpers for the audio pipeline: fixtures, a fake clock, a seeded PRNG, ffprobe/ffmpeg.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  createAudioPipeline,
  planAudio,
  type AudioPipeline,
  type AudioPlan,
  type Clock,
  type Unit,
} from '../../src/audio/index.js';
import type { GatewayError } from '../../src/protocol/errors.js';

import { FIXTURES } from '../support/fixtures.js';
import { delay } from '../support/wait.js';
export { FIXTURES, chromeChunks, fixture, prng, randomChunks } from '../support/fixtures.js';

export class FakeClock implements Clock {
  t = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  private nextId = 1;
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }
  get pending(): number {
    return this.timers.size;
  }
  /** Runs the earliest timer (moving time to it); false when none. */
  step(): boolean {
    let best: [number, { at: number; fn: () => void }] | undefined;
    for (const e of this.timers) if (!best || e[1].at < best[1].at) best = e;
    if (!best) return false;
    this.timers.delete(best[0]);
    this.t = Math.max(this.t, best[1].at);
    best[1].fn();
    return true;
  }
  /** Moves time forward by ms, running every timer due on the way. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let best: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!best || e[1].at < best[1].at)) best = e;
      if (!best) break;
      this.timers.delete(best[0]);
      this.t = Math.max(this.t, best[1].at);
      best[1].fn();
    }
    this.t = end;
  }
}

export function bytewise(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i++) out.push(data.subarray(i, i + 1));
  return out;
}

export interface Run {
  frames: Buffer[];
  /** Fake-clock time at which each frame was released. */
  times: number[];
  errors: GatewayError[];
  pipeline: AudioPipeline;
  clock: FakeClock;
}

export function plan(declared: string | undefined): AudioPlan {
  const p = planAudio(declared);
  if (!p.ok) throw new Error(p.reason);
  return p.plan;
}

export function open(
  declared: string | undefined,
  o: {
    chunkMs?: number;
    pace?: number;
    maxBufferedBytes?: number;
    maxFrameBytes?: number;
    clock?: FakeClock;
    /** sees each unit on its way to the re-chunker, as the session's replay keeper does */
    onUnit?: (u: Unit) => void;
  } = {},
): Run {
  const clock = o.clock ?? new FakeClock();
  const run: Run = { frames: [], times: [], errors: [], clock, pipeline: undefined as unknown as AudioPipeline };
  run.pipeline = createAudioPipeline({
    plan: plan(declared),
    chunkMs: o.chunkMs ?? 250,
    pace: o.pace ?? 1,
    maxBufferedBytes: o.maxBufferedBytes ?? 64 * 1024 * 1024,
    maxFrameBytes: o.maxFrameBytes,
    onFrame: (f) => {
      run.frames.push(f);
      run.times.push(clock.now());
    },
    onError: (e) => run.errors.push(e),
    onUnit: (u) => {
      o.onUnit?.(u);
      return u;
    },
    clock,
  });
  return run;
}

/** Sends what the pipeline holds, letting fake time run (pacing) and real time run (the transcoder's workers). */
export async function sendHeld(run: Run): Promise<void> {
  let done = false;
  run.pipeline.sendHeld().then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  while (!done) {
    await new Promise((r) => setImmediate(r));
    if (done) break;
    if (!run.clock.step()) await delay(2);
  }
}

/** Pushes all chunks at once (fake time stands still), then sends what is held. */
export async function runAll(
  declared: string | undefined,
  chunks: Buffer[],
  o: Parameters<typeof open>[1] = {},
): Promise<Run> {
  const run = open(declared, o);
  for (const c of chunks) run.pipeline.push(c);
  await sendHeld(run);
  run.pipeline.close();
  return run;
}

/** Runs a tool with `input` on stdin; resolves with stdout. */
export function tool(cmd: string, args: string[], input: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [],
      err: Buffer[] = [];
    p.stdout.on('data', (d: Buffer) => out.push(d));
    p.stderr.on('data', (d: Buffer) => err.push(d));
    p.stdin.on('error', () => {}); // ffprobe may stop reading early
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(out))
        : reject(new Error(`${cmd} exited ${code}: ${Buffer.concat(err).toString().slice(-500)}`)),
    );
    p.stdin.end(input);
  });
}

/** ffprobe of bytes (stdin) or of a fixture file (a path: durations of some formats need seeking). */
export async function probe(
  data: Buffer | string,
): Promise<{ codec: string; sampleRate: number; channels: number; duration: number }> {
  const src = typeof data === 'string' ? join(FIXTURES, data) : 'pipe:0';
  const out = await tool(
    'ffprobe',
    [
      '-v',
      'error',
      '-show_entries',
      'stream=codec_name,sample_rate,channels:format=duration',
      '-of',
      'json',
      '-i',
      src,
    ],
    typeof data === 'string' ? Buffer.alloc(0) : data,
  );
  const j = JSON.parse(out.toString());
  const s = j.streams?.[0] ?? {};
  return {
    codec: s.codec_name,
    sampleRate: Number(s.sample_rate),
    channels: Number(s.channels),
    duration: Number(j.format?.duration),
  };
}

/** Decoded duration in seconds, by decoding every sample with ffmpeg. */
export async function decodedSeconds(data: Buffer): Promise<number> {
  const pcm = await tool(
    'ffmpeg',
    ['-v', 'error', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1'],
    data,
  );
  return pcm.length / 2 / 48000;
}
