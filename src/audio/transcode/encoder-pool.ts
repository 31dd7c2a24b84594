// A small worker_threads pool for Opus encoding. Not piscina: piscina hands each task to any
// idle worker and cannot route a stream's calls to the worker holding its encoder state, and
// shipping Opus encoder state per call is not possible through the binding. So each stream is
// pinned to the worker with the fewest open streams when it opens. Workers start with the first
// stream that needs one (an idle gateway holds none: each costs ~15 MB RSS built, ~45 MB under
// tsx) and stop after `idleMs` without streams; at most `threads` run at once.
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import type { PcmFormat } from './pcm-format.js';
import type { EncoderOptions, EndResult, EncodeResult } from './stream-encoder.js';
import type { WorkerReply, WorkerRequest } from './encoder-protocol.js';

export interface EncoderPool {
  /** Workers running now. */
  readonly workers: number;
  close(): Promise<void>;
}

/** How long a worker without streams stays up (the next stream then needs no new thread). */
const DEFAULT_IDLE_MS = 60_000;

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
  idleTimer: NodeJS.Timeout | undefined;
  private outbox: WorkerRequest[] = [];
  private transfer: ArrayBuffer[] = [];

  constructor() {
    this.worker = spawnWorker();
    this.worker.unref(); // ref'd only while a request is in flight, so idle pools never hold the process open
    this.worker.on('message', (replies: WorkerReply[]) => {
      for (const m of replies) {
        const p = this.pending.get(m.req);
        if (!p) continue;
        this.pending.delete(m.req);
        p.resolve(m);
      }
      if (this.pending.size === 0) this.worker.unref();
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
      this.send(m, transfer);
    });
  }

  /** Requests leave once per event-loop turn, together: one message and one thread wake-up per
   * worker and turn instead of one per push (the worker answers a batch at once, too). */
  send(m: WorkerRequest, transfer: ArrayBuffer[] = []): void {
    if (this.dead) return;
    if (this.outbox.length === 0) setImmediate(() => this.flush());
    this.outbox.push(m);
    for (const t of transfer) this.transfer.push(t);
  }

  private flush(): void {
    const [batch, transfer] = [this.outbox, this.transfer];
    this.outbox = [];
    this.transfer = [];
    if (!this.dead) this.worker.postMessage(batch, transfer);
  }
}

export class WorkerEncoderPool implements EncoderPool {
  private readonly slots: (PoolWorker | undefined)[];
  private nextStream = 1;
  private nextReq = 1;
  private closed = false;

  constructor(
    threads: number,
    private readonly idleMs = DEFAULT_IDLE_MS,
  ) {
    this.slots = new Array(Math.max(1, threads)).fill(undefined);
  }

  get workers(): number {
    return this.slots.filter((w) => w && !w.dead).length;
  }

  /** Opens a stream on the least-loaded worker (workers start lazily; a dead one is replaced). */
  open(format: PcmFormat, options: EncoderOptions): PooledStream {
    if (this.closed) throw new Error('encoder pool is closed');
    const w = this.pick();
    clearTimeout(w.idleTimer);
    const stream = this.nextStream++;
    w.streams++;
    w.send({ op: 'open', stream, format, options });
    let open = true;
    const release = () => {
      if (!open) return;
      open = false;
      if (--w.streams === 0) this.stopWhenIdle(w);
    };
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

  /** An idle worker first, then a new thread while there is room, then the least loaded. */
  private pick(): PoolWorker {
    let least: PoolWorker | undefined;
    let free = -1;
    for (let i = 0; i < this.slots.length; i++) {
      const w = this.slots[i];
      if (!w || w.dead) {
        if (free < 0) free = i;
        continue;
      }
      if (!least || w.streams < least.streams) least = w;
    }
    if (least && (least.streams === 0 || free < 0)) return least;
    return (this.slots[free] = new PoolWorker());
  }

  private stopWhenIdle(w: PoolWorker): void {
    w.idleTimer = setTimeout(() => {
      if (w.streams > 0) return;
      const i = this.slots.indexOf(w);
      if (i >= 0) this.slots[i] = undefined;
      void w.worker.terminate();
    }, this.idleMs).unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    const ws = this.slots.filter((w): w is PoolWorker => !!w);
    this.slots.fill(undefined);
    for (const w of ws) clearTimeout(w.idleTimer);
    await Promise.all(ws.map((w) => w.worker.terminate()));
  }
}

function unpack(all: Uint8Array, lengths: number[]): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  for (const n of lengths) {
    out.push(Buffer.from(all.buffer, all.byteOffset + off, n));
    off += n;
  }
  return out;
}

export function createEncoderPool(o: { threads?: number; idleMs?: number } = {}): EncoderPool {
  return new WorkerEncoderPool(o.threads ?? availableParallelism(), o.idleMs);
}

let defaultPool: WorkerEncoderPool | undefined;

/** The module-level pool, created on first use with up to one thread per core. */
export function getDefaultEncoderPool(): WorkerEncoderPool {
  return (defaultPool ??= new WorkerEncoderPool(availableParallelism()));
}

/** Closes the default pool (process shutdown, tests); the next use creates a new one. */
export async function closeDefaultEncoderPool(): Promise<void> {
  const p = defaultPool;
  defaultPool = undefined;
  await p?.close();
}
