// Worker thread: keeps one StreamEncoder per stream id (Opus state must persist across a
// stream's calls, so the pool pins each stream to one worker).
import { parentPort } from 'node:worker_threads';
import { StreamEncoder, type EncodeResult } from './stream-encoder.js';
import type { WorkerReply, WorkerRequest } from './encoder-protocol.js';

const port = parentPort;
if (!port) throw new Error('encoder-worker must run in a worker thread');
const streams = new Map<number, Promise<StreamEncoder>>();

function packed(packets: Buffer[]): { packets: Uint8Array; lengths: number[] } {
  const all = new Uint8Array(packets.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of packets) {
    all.set(p, off);
    off += p.length;
  }
  return { packets: all, lengths: packets.map((p) => p.length) };
}

/** Handles one request; a push or end adds its reply (and the buffer to transfer) to the batch's. */
async function handle(m: WorkerRequest, replies: WorkerReply[], transfer: ArrayBuffer[]): Promise<void> {
  if (m.op === 'open') {
    const p = StreamEncoder.create(m.format, m.options);
    p.catch(() => {}); // reported on the stream's first push/end
    streams.set(m.stream, p);
    return;
  }
  const enc = streams.get(m.stream);
  if (m.op === 'close') {
    streams.delete(m.stream);
    enc?.then(
      (e) => e.destroy(),
      () => {},
    );
    return;
  }
  try {
    if (!enc) throw new Error(`unknown stream ${m.stream}`);
    const e = await enc;
    if (m.op === 'end') streams.delete(m.stream);
    const r: EncodeResult & { endGranule?: number } = m.op === 'push' ? e.push(m.pcm) : e.end();
    const p = packed(r.packets);
    replies.push({ req: m.req, ok: true, ...p, seconds: r.seconds, endGranule: r.endGranule });
    transfer.push(p.packets.buffer as ArrayBuffer);
  } catch (err) {
    if (m.op === 'end') streams.delete(m.stream);
    replies.push({ req: m.req, ok: false, error: err instanceof Error ? err.message : String(err) });
  }
}

// The pool sends what a turn of its event loop asked for as one batch; the answers go back as one.
port.on('message', async (batch: WorkerRequest[]) => {
  const replies: WorkerReply[] = [];
  const transfer: ArrayBuffer[] = [];
  for (const m of batch) await handle(m, replies, transfer);
  if (replies.length) port.postMessage(replies, transfer);
});
