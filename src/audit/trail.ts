// The audit trail: each event goes to the sink (file or stdout) at once and, when it names a tenant,
// to the store the usage API queries; repeats of a refusal or of a usage API call are folded first
// (coalesce.ts), in both. A failure of either is logged without the event and counted; it never
// reaches the session or request that caused the event.
import type { BlockList } from 'node:net';
import { metrics, type Logger } from '../telemetry/index.js';
import type { LifecycleEvent, SessionInfo } from '../session/index.js';
import { clientAddress, type Origin } from './address.js';
import { Coalescer } from './coalesce.js';
import { auditEvent, resumeLink, type AuditEvent, type AuditInput } from './event.js';
import { sessionEvent } from './session.js';
import type { AuditSink } from './sink.js';
import type { AuditCursor, AuditStore } from './store.js';

export interface AuditPageQuery {
  tenant: string;
  from: number;
  to: number;
  limit: number;
  /** a `next` this trail returned; one it did not is a RangeError */
  cursor?: string;
}

export interface TrailOptions {
  sink: AuditSink;
  store: AuditStore;
  /** TRUSTED_PROXIES and TRUSTED_PROXY_CIDRS */
  proxies: { hops: number; list: BlockList | undefined };
  /** the key resume links are made with (linkKeyOf) */
  linkKey: Buffer;
  /** how long identical refusals and API calls are folded into one event */
  coalesceMs: number;
  log: Logger;
  now?: () => number;
}

/** Store writes in flight at most (a slow Redis): past it, an event reaches the sink only, counted. */
const MAX_PENDING = 10_000;
/** A failing sink is logged at most this often. */
const FAILURE_LOG_MS = 1000;

export class AuditTrail {
  private readonly pending = new Set<Promise<void>>();
  private readonly coalescer: Coalescer;
  private readonly now: () => number;
  private readonly lastFailureLog = { log: -Infinity, store: -Infinity };
  private readonly unlogged = { log: 0, store: 0 };

  constructor(private readonly o: TrailOptions) {
    this.now = o.now ?? Date.now;
    this.coalescer = new Coalescer(o.coalesceMs, (e, at) => this.write(e, at), this.now);
  }

  /** Where a client socket came from: the socket's peer and, from a trusted proxy, X-Forwarded-For. */
  origin(peer: string, forwardedFor: string | undefined): Origin {
    const { hops, list } = this.o.proxies;
    return { address: clientAddress(peer, forwardedFor, hops, list), peer };
  }

  record(input: AuditInput): void {
    const at = this.now();
    if (this.coalescer.offer(input, at)) this.write(input, at);
  }

  private write(input: AuditInput, at: number): void {
    const link = input.resumeKey === undefined ? {} : { resumeKeyHash: resumeLink(this.o.linkKey, input.resumeKey) };
    const e = auditEvent({ ...input, ...link }, at);
    try {
      this.o.sink.write(e);
    } catch (err) {
      this.failed('log', err);
    }
    const mode = input.trail ?? 'create';
    if (e.tenant && mode !== 'none') this.keep(e.tenant, e, at, mode === 'create');
  }

  /** Every step of the lifecycle of the session `info` describes, from now on, as its audit event
   * (SessionDeps.observe: attached before the session's first event). */
  attach(info: SessionInfo, on: (listener: (e: LifecycleEvent) => void) => void): void {
    on((e) => {
      const input = sessionEvent(info, e);
      if (input) this.record(input);
    });
  }

  async query(q: AuditPageQuery): Promise<{ events: AuditEvent[]; next: string | null }> {
    const after = q.cursor ? decodeCursor(q.cursor) : null;
    const page = await this.o.store.range({ tenant: q.tenant, from: q.from, to: q.to, limit: q.limit, after });
    return { events: page.events, next: page.next ? encodeCursor(page.next) : null };
  }

  /** Resolves once the store has every event recorded so far (or failed to take it). */
  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  async close(): Promise<void> {
    this.coalescer.flush();
    await this.flush();
    await this.o.store.close();
    this.o.sink.close();
  }

  private keep(tenant: string, e: AuditEvent, at: number, create: boolean): void {
    if (this.pending.size >= MAX_PENDING) return this.failed('store', new Error('too many store writes in flight'));
    let added;
    try {
      added = this.o.store.add(tenant, e, at, create);
    } catch (err) {
      return this.failed('store', err);
    }
    if (!added) return;
    const p = added.catch((err: unknown) => this.failed('store', err)).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Counted each time; logged with the error's message only (the event's fields stay out of the
   * normal log), at most once a second per sink with how many failed since: a stalled stdout or a
   * full disk fails every event, and a line for each would only add to the flood. */
  private failed(sink: 'log' | 'store', err: unknown): void {
    metrics.auditWriteFailures.inc({ sink });
    const at = this.now();
    const last = this.lastFailureLog[sink];
    this.unlogged[sink]++;
    if (at - last < FAILURE_LOG_MS) return;
    this.lastFailureLog[sink] = at;
    const failures = this.unlogged[sink];
    this.unlogged[sink] = 0;
    this.o.log.error(
      { event: 'audit_write_failed', sink, failures, err: (err as Error).message },
      'audit event not written',
    );
  }
}

function encodeCursor(c: AuditCursor): string {
  return Buffer.from(JSON.stringify([c.score, c.member])).toString('base64url');
}

function decodeCursor(s: string): AuditCursor {
  try {
    const [score, member] = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown[];
    if (typeof score === 'number' && Number.isFinite(score) && typeof member === 'string') return { score, member };
  } catch {
    // fall through
  }
  throw new RangeError('cursor is not a cursor this API returned');
}
