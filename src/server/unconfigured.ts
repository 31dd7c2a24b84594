// Sockets open without a config are not sessions yet: no ledger session, no tenant slot. What
// bounds them is a count per token and, much higher, per token subject (every token of one
// client-credentials client has the same subject; tokens without one share their tenant's), taken
// at the upgrade and given back once a valid config arrives (the tenant's cap bounds the socket from
// then on) or the socket closes. Per token: one holder's idle sockets never refuse another holder;
// the subject's backstop bounds a holder that fetches many tokens. A socket over a bound waits a
// moment for a place before it is refused: a burst whose first sockets are sending their configs
// frees places within milliseconds. The waiting requests are bounded too. Per replica: it bounds one
// process's memory and sockets, which is what a flood of idle sockets costs.
import { createHash } from 'node:crypto';
import { metrics } from '../telemetry/index.js';

/** Where one socket is counted: its token's count and its subject's. */
export interface UnconfiguredKey {
  readonly token: string;
  readonly subject: string;
}

export interface UnconfiguredBounds {
  /** per token; 0: no bound */
  perToken: number;
  /** per token subject (tokens without one: per tenant); 0: no bound */
  perSubject: number;
  /** how long an upgrade over a bound waits for a place (default WAIT_MS) */
  waitMs?: number;
}

/** Under the vendor SDK's 4 s connect timeout, with room for the handshake around it. */
export const WAIT_MS = 2000;
/** Upgrades that may wait, per place of a token's bound (and at most the subject's bound in all). */
const WAITING_PER_PLACE = 4;

interface Waiter {
  key: UnconfiguredKey;
  granted: () => void;
}

export class UnconfiguredSockets {
  private readonly tokens = new Map<string, number>();
  private readonly subjects = new Map<string, number>();
  /** by subject, oldest first: a place a socket of the subject gives back can only serve these */
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly waitingTokens = new Map<string, number>();
  private readonly waitMs: number;

  constructor(private readonly bounds: UnconfiguredBounds) {
    this.waitMs = bounds.waitMs ?? WAIT_MS;
  }

  /** The count's keys: a digest of the token (never the token itself) and the tenant's subject. */
  static keyOf(tenant: string, subject: string | undefined, token: string): UnconfiguredKey {
    const digest = createHash('sha256').update(token).digest('base64url').slice(0, 22);
    return { token: `${tenant}\u0000${digest}`, subject: `${tenant}\u0000${subject ?? ''}` };
  }

  /** undefined: counted (give it back with release). Else the bound that stayed full: the socket is refused. */
  async take(key: UnconfiguredKey): Promise<'token' | 'subject' | undefined> {
    const full = this.full(key);
    if (full === undefined) return void this.count(key, 1);
    if (!this.mayWait(key)) return full;
    const queue = this.waiting.get(key.subject) ?? [];
    this.waiting.set(key.subject, queue);
    bump(this.waitingTokens, key.token, 1);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        key,
        granted: () => {
          clearTimeout(timer);
          resolve(undefined);
        },
      };
      const timer = setTimeout(() => {
        this.unqueue(waiter);
        const still = this.full(key);
        if (still === undefined) this.count(key, 1);
        resolve(still);
      }, this.waitMs);
      queue.push(waiter);
    });
  }

  release(key: UnconfiguredKey): void {
    if (!this.tokens.has(key.token)) return;
    this.count(key, -1);
    // The oldest waiter of the subject that fits now takes the place.
    const next = this.waiting.get(key.subject)?.find((w) => this.full(w.key) === undefined);
    if (!next) return;
    this.unqueue(next);
    this.count(next.key, 1);
    next.granted();
  }

  private full(key: UnconfiguredKey): 'token' | 'subject' | undefined {
    const { perToken, perSubject } = this.bounds;
    if (perToken > 0 && (this.tokens.get(key.token) ?? 0) >= perToken) return 'token';
    if (perSubject > 0 && (this.subjects.get(key.subject) ?? 0) >= perSubject) return 'subject';
    return undefined;
  }

  private mayWait(key: UnconfiguredKey): boolean {
    const { perToken, perSubject } = this.bounds;
    if (perToken > 0 && (this.waitingTokens.get(key.token) ?? 0) >= WAITING_PER_PLACE * perToken) return false;
    return !(perSubject > 0 && (this.waiting.get(key.subject)?.length ?? 0) >= perSubject);
  }

  private unqueue(w: Waiter): void {
    const queue = this.waiting.get(w.key.subject);
    const i = queue?.indexOf(w) ?? -1;
    if (i < 0) return;
    queue!.splice(i, 1);
    if (queue!.length === 0) this.waiting.delete(w.key.subject);
    bump(this.waitingTokens, w.key.token, -1);
  }

  private count(key: UnconfiguredKey, by: 1 | -1): void {
    bump(this.tokens, key.token, by);
    bump(this.subjects, key.subject, by);
    if (by > 0) metrics.unconfiguredSockets.inc();
    else metrics.unconfiguredSockets.dec();
  }
}

/** Adds `by` to `key`'s count; a count that reaches 0 is removed, so the maps hold only live keys. */
function bump(m: Map<string, number>, key: string, by: number): void {
  const n = (m.get(key) ?? 0) + by;
  if (n <= 0) m.delete(key);
  else m.set(key, n);
}
