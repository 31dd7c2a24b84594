// A small worker_threads pool for Opus encoding. Not piscina: piscina hands each task to any
// idle worker and cannot route a stream's calls to the worker holding its encoder state, and
// shipping Opus encoder state per call is not possible through the binding. So each stream is
// pinned to the worker with the fewest open streams when it opens.
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import type { PcmFormat } from './pcm-format.js';
import type { EncoderOptions, EndResult, EncodeResult } from './stream-encoder.js';
import type { WorkerReply, WorkerRequest } from './encoder-protocol.js';

export interface EncoderPool {
  /** Boots every worker now (optional at start-up; otherwise they start with their first stream). */
  warm(): Promise<void>;
  close(): Promise<void>;
}

/** A stream's handle on its pinned worker. */
export interface PooledStream {
  push(pcm: Uint8Array): Promise<EncodeResult>;
  end(): Promise<EndResult>;
  close(): void;
}

type Pending = { resolve: (r: WorkerReply) => void; reject: (e: Error) => void };

// Built output is .js next to this file. Under tsx the sources are .ts, and Node 20 does not
// run the main thread's --import hooks in workers, so the worker registers tsx itself first.
const RUNNING_TS = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(RUNNING_TS ? './encoder-worker.ts' : './encoder-worker.js', import.meta.url);

function spawnWorker(): Worker {
  if (!RUNNING_TS) return new Worker(WORKER_URL);
  const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { eval: true });
}

class PoolWorker {
  readonly worker: Worker;
  readonly pending = new Map<number, Pending>();
  streams = 0;
  dead: Error | undefined;

  constructor() {
    this.worker = spawnWorker();
    this.worker.unref(); // ref'd only while a request is in flight, so idle pools never hold the process open
    this.worker.on('message', (m: WorkerReply) => {
      const p = this.pending.get(m.req);
      if (!p) return;
      this.pending.delete(m.req);
      if (this.pending.size === 0) this.worker.unref();
      p.resolve(m);
    });
    const fail = (e: Error) => {
      this.dead ??= e;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`encoder worker exited (code ${code})`)));
  }

  request(req: number, m: WorkerRequest, transfer: ArrayBuffer[] = []): Promise<WorkerReply> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(req, { resolve, reject });
      this.worker.postMessage(m, transfer);
    });
  }

  send(m: WorkerRequest): void {
    if (!this.dead) this.worker.postMessage(m);
  }
}

export class WorkerEncoderPool implements EncoderPool {
  private readonly workers: (PoolWorker | undefined)[];
  private nextStream = 1;
  private nextReq = 1;
  private closed = false;

  constructor(threads: number) {
    this.workers = new Array(Math.max(1, threads)).fill(undefined);
  }

  /** Opens a stream on the least-loaded worker (workers start lazily; a dead one is replaced). */
  open(format: PcmFormat, options: EncoderOptions): PooledStream {
    if (this.closed) throw new Error('encoder pool is closed');
    let best = -1;
    for (let i = 0; i < this.workers.length; i++) {
      const w = this.workers[i];
      if (!w || w.dead) { this.workers[i] = undefined; best = i; break; }
      if (best < 0 || w.streams < this.workers[best]!.streams) best = i;
    }
    const w = (this.workers[best] ??= new PoolWorker());
    const stream = this.nextStream++;
    w.streams++;
    w.send({ op: 'open', stream, format, options });
    let open = true;
    const release = () => { if (open) { open = false; w.streams--; } };
    const call = async (m: WorkerRequest, transfer?: ArrayBuffer[]) => {
      const r = await w.request((m as { req: number }).req, m, transfer);
      if (!r.ok) throw new Error(`opus encoder: ${r.error}`);
      return { packets: unpack(r.packets, r.lengths), seconds: r.seconds, endGranule: r.endGranule };
    };
    return {
      push: (pcm) => {
        const copy = new Uint8Array(pcm); // own buffer to transfer; the caller may reuse theirs
        return call({ op: 'push', stream, req: this.nextReq++, pcm: copy }, [copy.buffer]);
      },
      end: async () => {
        try {
          const r = await call({ op: 'end', stream, req: this.nextReq++ });
          return { packets: r.packets, seconds: r.seconds, endGranule: r.endGranule ?? 0 };
        } finally {
          release();
        }
      },
      close: () => {
        if (!open) return;
        release();
        w.send({ op: 'close', stream });
      },
    };
  }

  /** Starts every worker now, so the first stream does not wait for a worker to boot. */
  async warm(): Promise<void> {
    for (let i = 0; i < this.workers.length; i++) if (!this.workers[i] || this.workers[i]!.dead) this.workers[i] = new PoolWorker();
    await Promise.all(this.workers.map((w) => {
      const req = this.nextReq++;
      return w!.request(req, { op: 'ping', req }).catch(() => {});
    }));
  }

  async close(): Promise<void> {
    this.closed = true;
    const ws = this.workers.filter((w): w is PoolWorker => !!w);
    this.workers.fill(undefined);
    await Promise.all(ws.map((w) => w.worker.terminate()));
  }
}

function unpack(all: Uint8Array, lengths: number[]): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  for (const n of lengths) { out.push(Buffer.from(all.buffer, all.byteOffset + off, n)); off += n; }
  return out;
}

export function createEncoderPool(o: { threads?: number } = {}): EncoderPool {
  return new WorkerEncoderPool(o.threads ?? availableParallelism());
}

let defaultPool: WorkerEncoderPool | undefined;

/** The module-level pool, created on first use with one thread per core. */
export function getDefaultEncoderPool(): WorkerEncoderPool {
  return (defaultPool ??= new WorkerEncoderPool(availableParallelism()));
}

/** Closes the default pool (process shutdown, tests); the next use creates a new one. */
/** Boots the default pool's workers (call at start-up; the first PCM session then pays nothing). */
export async function warmDefaultEncoderPool(): Promise<void> {
  await getDefaultEncoderPool().warm();
}

export async function closeDefaultEncoderPool(): Promise<void> {
  const p = defaultPool;
  defaultPool = undefined;
  await p?.close();
}
