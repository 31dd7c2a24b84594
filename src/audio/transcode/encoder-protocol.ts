// Messages between the main thread and encoder workers.
import type { PcmFormat } from './pcm-format.js';
import type { EncoderOptions } from './stream-encoder.js';

export type WorkerRequest =
  | { op: 'open'; stream: number; format: PcmFormat; options: EncoderOptions }
  | { op: 'push'; stream: number; req: number; pcm: Uint8Array }
  | { op: 'end'; stream: number; req: number }
  | { op: 'close'; stream: number };

export type WorkerReply =
  | { req: number; ok: true; packets: Uint8Array; lengths: number[]; seconds: number; endGranule?: number }
  | { req: number; ok: false; error: string };
