// What tests can inspect about one upstream socket session. Its audio is kept by a KeptAudio, which
// the record's window bounds.
import type { Endpoint } from '../protocol/index.js';
import { KeptAudio, type AudioBudget } from './kept-audio.js';
import type { EmulatorSession } from './types.js';

export class SessionRecord implements EmulatorSession {
  interactionId?: string;
  sessionId?: string;
  config?: unknown;
  configCount = 0;
  mediaSeconds = 0;
  received: EmulatorSession['received'] = [];
  sent: unknown[] = [];
  /** set once, when the socket closed (from either side) */
  closeCode?: number;
  stoppedTranscribingAt?: number;
  withheldTranscripts = 0;
  private kept: KeptAudio;

  constructor(
    readonly endpoint: Endpoint,
    readonly tenant: string,
    readonly token: string,
    budget: AudioBudget,
  ) {
    this.kept = new KeptAudio(budget);
  }

  get closed(): boolean {
    return this.closeCode !== undefined;
  }

  get frames(): number[] {
    return this.kept.frames;
  }

  get firstFrame(): Buffer | undefined {
    return this.kept.firstFrame;
  }

  get audio(): Buffer {
    return this.kept.joined;
  }

  get audioDropped(): boolean {
    return this.kept.dropped;
  }

  get keptAudioBytes(): number {
    return this.kept.bytes;
  }

  addFrame(frame: Buffer): void {
    this.kept.add(frame);
  }

  /** Forgets the audio and keeps none from now on; returns the bytes freed. */
  dropAudio(): number {
    return this.kept.drop();
  }
}
