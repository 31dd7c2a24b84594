// What tests can inspect about one upstream socket session. Audio is kept as a chunk list and
// concatenated on first read, so long sessions don't copy their audio on every frame.
import type { EmulatorSession } from './types.js';

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
  private chunks: Buffer[] = [];
  private joined: Buffer | null = null;

  constructor(readonly endpoint: 'transcribe' | 'streams', readonly tenant: string, readonly token: string, private keepAudio: boolean) {}

  addFrame(frame: Buffer): void {
    this.frames.push(frame.length);
    this.firstFrame ??= Buffer.from(frame);
    if (!this.keepAudio) return;
    this.chunks.push(frame);
    this.joined = null;
  }

  get audio(): Buffer {
    this.joined ??= Buffer.concat(this.chunks);
    return this.joined;
  }
}
