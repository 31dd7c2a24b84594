// Where each resumable session of this replica stands, for a successor after a crash, at a small
// steady cost in Redis. A session's record (its sealed content) is written at its lifecycle steps
// only; what moves while it streams (its timeline: numbers only) goes to one hash of this replica's,
// a field per session, written for every session that moved in one command:
//  - a final delivered to its client at once, batched with the others of the moment, the batches at
//    least FLUSH_EVERY_MS apart: a crash repeats at most the finals of that long to a resumed client;
//  - any other move with the next batch, at most WRITE_EVERY_MS later.
// The owner also reads all its records back every CHECK_MS in one MGET (another replica took one
// over, or Redis lost it; on Redis Cluster one GET a record, each every fifth check) and keeps each
// alive (PEXPIRE) well within its TTL.
import type { Logger } from '../telemetry/index.js';
import { positionField, type RecordStore, type RecordTimeline, type SealedRecord } from './records.js';

const FLUSH_EVERY_MS = 100;
const WRITE_EVERY_MS = 1000;
const CHECK_MS = 4000;
const UNBATCHED_TURNS = 5;
const MAX_GONE = 10_000;
/** The positions hash's TTL is renewed at most this often (it is the records' TTL). */
const EXPIRE_EVERY_MS = 5000;

interface Tracked {
  /** what the check found: the record, or undefined when it is gone */
  onCheck(r: SealedRecord | undefined): void;
  touchedAt: number;
}

export class Positions {
  private pending = new Map<string, string>();
  private gone: string[] = [];
  private readonly tracked = new Map<string, Tracked>();
  private flushing = false;
  private again = false;
  private lastFlush = 0;
  private lastExpire = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private failing = false;
  private checks = 0;
  private readonly checker: NodeJS.Timeout;

  constructor(
    private readonly records: RecordStore,
    private readonly replica: () => string,
    private readonly logger: Logger,
    /** how often a record is kept alive: well within its TTL */
    private readonly touchEveryMs: number,
  ) {
    this.checker = setInterval(() => void this.check(), CHECK_MS);
    this.checker.unref();
  }

  /** Checks and keeps alive the record `keyHash` until the returned function is called. */
  track(keyHash: string, onCheck: Tracked['onCheck']): () => void {
    this.tracked.set(keyHash, { onCheck, touchedAt: Date.now() });
    return () => {
      this.tracked.delete(keyHash);
      this.pending.delete(positionField(keyHash));
      this.gone.push(positionField(keyHash));
      this.schedule(WRITE_EVERY_MS);
    };
  }

  /** The session's position now; `urgent`: a final reached its client. */
  set(keyHash: string, position: string, urgent: boolean): void {
    this.pending.set(positionField(keyHash), position);
    this.schedule(urgent ? 0 : WRITE_EVERY_MS);
  }

  close(): void {
    clearInterval(this.checker);
    clearTimeout(this.timer);
  }

  private schedule(delayMs: number): void {
    const at = Math.max(Date.now() + delayMs, this.lastFlush + FLUSH_EVERY_MS);
    if (this.timer && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    // `at` may be now, and a millisecond gone since: a negative delay would make Node warn.
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        void this.flush();
      },
      Math.max(0, at - Date.now()),
    );
    this.timer.unref();
  }

  private async flush(): Promise<void> {
    if (this.flushing) {
      this.again = true;
      return;
    }
    if (this.pending.size === 0 && this.gone.length === 0) return;
    this.flushing = true;
    this.lastFlush = Date.now();
    const set = this.pending;
    const del = this.gone;
    this.pending = new Map();
    this.gone = [];
    const expire = Date.now() - this.lastExpire >= EXPIRE_EVERY_MS;
    try {
      await this.records.writePositions(this.replica(), set, del, expire);
      if (expire) this.lastExpire = Date.now();
      this.failing = false;
    } catch (err) {
      // Not written: kept for the next batch, a newer position of the same session winning.
      for (const [field, value] of set) if (!this.pending.has(field)) this.pending.set(field, value);
      // Deletions wait too, at most MAX_GONE (a field left behind goes with the hash, at this replica's end).
      this.gone = [...del, ...this.gone].slice(-MAX_GONE);
      if (!this.failing)
        this.logger.warn(
          { event: 'positions_write_failed', err: (err as Error).message },
          'session positions not written',
        );
      this.failing = true;
    } finally {
      this.flushing = false;
    }
    if (this.again || this.pending.size || this.gone.length) this.schedule(this.again ? 0 : WRITE_EVERY_MS);
    this.again = false;
  }

  private async check(): Promise<void> {
    if (this.tracked.size === 0) return;
    // Without batched reads (Redis Cluster: a GET a record) each record is read every fifth check.
    const turn = this.checks++ % UNBATCHED_TURNS;
    const hashes = [...this.tracked.keys()].filter((_, i) => this.records.batchedReads || i % UNBATCHED_TURNS === turn);
    const found = await this.records.getMany(hashes).catch(() => undefined);
    if (!found) return; // Redis away: nothing to learn; the writes say so
    const due = Date.now() - this.touchEveryMs;
    const touches: Array<Promise<boolean>> = [];
    hashes.forEach((hash, i) => {
      const t = this.tracked.get(hash);
      if (!t) return;
      try {
        t.onCheck(found[i]);
      } catch (err) {
        // One session's failure to act on its record is that session's: the others are still checked.
        this.logger.warn({ event: 'record_check_failed', err: (err as Error).message }, 'session record check failed');
      }
      if (found[i]?.owner !== this.replica() || t.touchedAt > due) return;
      t.touchedAt = Date.now();
      touches.push(this.records.touch(hash).catch(() => false));
    });
    await Promise.all(touches);
  }
}

/** A session's timeline as its position: numbers only, in a fixed order, with when it was taken. */
export function encodePosition(t: RecordTimeline, at: number): string {
  // Media received only counts media (in ms at most): a microsecond is enough, and shorter to write.
  // The timeline's own points (offset, finalUntil) stay exact: finals are matched against them.
  const us = (x: number) => Math.round(x * 1e6) / 1e6;
  return JSON.stringify([
    at,
    t.offset,
    t.finalUntil,
    us(t.mediaReceived),
    t.audioBytes,
    t.segment,
    t.seq,
    t.credits?.total ?? null,
    t.credits?.told ?? null,
    t.resume?.audioBytes ?? null,
    t.resume ? us(t.resume.mediaReceived) : null,
  ]);
}

/** The timeline a position holds over `base` (the record's), or undefined when it is not a
 *  position this code wrote (Redis is not trusted to hold one). */
export function decodePosition(s: string, base: RecordTimeline): { at: number; timeline: RecordTimeline } | undefined {
  let v: unknown;
  try {
    v = JSON.parse(s);
  } catch {
    return undefined;
  }
  const n = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x >= 0;
  if (!Array.isArray(v) || v.length !== 11 || !v.every((x, i) => n(x) || (i >= 7 && x === null))) return undefined;
  const [at, offset, finalUntil, mediaReceived, audioBytes, segment, seq, total, told, ra, rm] = v as number[];
  if (!Number.isInteger(segment) || !Number.isInteger(seq) || !Number.isInteger(audioBytes)) return undefined;
  return {
    at,
    timeline: {
      ...base,
      offset,
      finalUntil,
      mediaReceived,
      audioBytes,
      segment,
      seq,
      credits: total === null || told === null ? undefined : { total, told },
      resume: ra === null || rm === null ? undefined : { audioBytes: ra, mediaReceived: rm },
    },
  };
}
