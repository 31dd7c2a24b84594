// What tests can inspect about one upstream socket session. Audio is kept as a chunk list and
// concatenated on first read, so long sessions don't copy their audio on every frame; the window
// it belongs to bounds how much audio all records keep together.
import type { Endpoint } from '../protocol/index.js';
import type { EmulatorSession } from './types.js';

export interface AudioBudget {
  kept(bytes: number): void;
}

export class SessionRecord implements EmulatorSession {
  interactionId?: string;
  sessionId?: string;
  config?: unknown;
  configCount = 0;
  frames: number[] = [];
  firstFrame?: Buffer;
  mediaSeconds = 0;
  received: EmulatorSession['received'] = [];
  sent: unknown[] = [];
  closed = false;
  closeCode?: number;
  audioDropped = false;
  keptAudioBytes = 0;
  private chunks: Buffer[] = [];

  constructor(
    readonly endpoint: Endpoint,
    readonly tenant: string,
    readonly token: string,
    private budget: AudioBudget,
  ) {}

  addFrame(frame: Buffer): void {
    this.frames.push(frame.length);
    this.firstFrame ??= Buffer.from(frame);
    if (this.audioDropped) return;
    this.chunks.push(frame);
    this.keptAudioBytes += frame.length;
    this.budget.kept(frame.length);
  }

  get audio(): Buffer {
    // Joined once and kept as the single chunk, so a read does not double the memory held.
    if (this.chunks.length !== 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0];
  }

  /** Forgets the audio and keeps none from now on; returns the bytes freed. */
  dropAudio(): number {
    const freed = this.keptAudioBytes;
    this.audioDropped = true;
    this.chunks = [];
    this.keptAudioBytes = 0;
    return freed;
  }
}
