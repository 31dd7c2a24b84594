// The usage ledger the sessions call. Calls only enqueue (never throw, never wait); one writer
// loop applies events in order to the store, or, while the store is unavailable, appends them
// to the on-disk journal. While the journal holds anything, new events go behind it, and the
// journal is replayed (idempotently, in order) as soon as the store is back.
import { logger, metrics } from '../telemetry/index.js';
import type { Journal } from './journal.js';
import {
  MAX_CREDITS_PER_MESSAGE,
  MAX_GAPS,
  MAX_TOTAL,
  StoreUnavailable,
  creditsInRange,
  segmentOf,
  storable,
  toMediaMs,
  toMicro,
  type CoverageMs,
  type GapMs,
  type LedgerEvent,
  type Outcome,
  type SessionStart,
  type SpeechCoverage,
  type UsageStore,
} from './model.js';

export interface UsageLedger {
  sessionStarted(s: SessionStart): void;
  /** `seg`: which of the session's upstream sessions (0, 1, 2, … in turn; default 0). */
  setUpstreamSessionId(sessionKey: string, upstreamSessionId: string, seg?: number): void;
  /**
   * `seq` is unique per gateway session across its segments; a replayed seq is counted once.
   * False when the figure was refused (below 0, above MAX_CREDITS_PER_MESSAGE, or not a number):
   * it is counted nowhere and the session's usage is marked estimated.
   */
  recordUsage(e: UsageRecord): boolean;
  /** `coverage`: a live session's speech (absent: none measured); figures out of range are dropped. */
  sessionEnded(e: SessionEnd): void;
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly journalDepth: number;
  readonly redisHealthy: boolean;
}

export interface SessionEnd {
  sessionKey: string;
  outcome: Outcome;
  mediaSeconds: number;
  endedAt: number;
  coverage?: SpeechCoverage;
}

export interface UsageRecord {
  sessionKey: string;
  seq: number;
  seg?: number;
  kind: 'delta' | 'final';
  credits: number;
  at: number;
}

/** What the ledger needs to know about the store's availability (always up in process). */
export interface Health {
  readonly healthy: boolean;
  markFailed(reason: string): void;
  onHealthy(f: () => void): void;
}

const BATCH = 500;

/** Whole milliseconds a store can hold, or null (not a number, below 0, past 2^53). */
const ms = (seconds: unknown): number | null => {
  const n = typeof seconds === 'number' ? toMediaMs(seconds) : NaN;
  return storable(n) ? n : null;
};

/** A session's coverage in stored form: its speech and covered figures (covered at most the speech),
 * the first MAX_GAPS well-formed gaps (a gap's speech at most its span), the rest counted; null
 * when the speech or covered figure is not a number of seconds. */
function coverageMs(c: SpeechCoverage): CoverageMs | null {
  const speechMs = ms(c.speechSeconds);
  const coveredMs = ms(c.coveredSeconds);
  if (speechMs === null || coveredMs === null) return null;
  const told = Array.isArray(c.gaps) ? c.gaps : [];
  const gaps: GapMs[] = [];
  for (const g of told.slice(0, MAX_GAPS)) {
    const [start, end, speech] = [ms(g?.start), ms(g?.end), ms(g?.speechSeconds)];
    if (start !== null && end !== null && speech !== null && start <= end)
      gaps.push([start, end, Math.min(speech, end - start)]);
  }
  const more = Number.isSafeInteger(c.moreGaps) && c.moreGaps > 0 ? c.moreGaps : 0;
  const moreGaps = Math.min(MAX_TOTAL, more + Math.max(0, told.length - MAX_GAPS));
  return { speechMs, coveredMs: Math.min(coveredMs, speechMs), gaps, moreGaps };
}

export class Ledger implements UsageLedger {
  private queue: LedgerEvent[] = [];
  private running: Promise<void> | null = null;

  constructor(
    private readonly store: UsageStore,
    private readonly journal: Journal | null,
    private readonly health: Health,
  ) {
    health.onHealthy(() => this.kick());
    metrics.journalDepth.set(journal?.depth ?? 0);
    if (journal && journal.depth > 0)
      logger.info({ events: journal.depth }, 'usage journal found; replaying when redis is available');
    this.kick();
  }

  get journalDepth(): number {
    return this.journal?.depth ?? 0;
  }

  get redisHealthy(): boolean {
    return this.health.healthy;
  }

  sessionStarted(s: SessionStart): void {
    this.guard(() =>
      this.push({
        t: 'start',
        k: s.sessionKey,
        tenant: s.tenant,
        endpoint: s.endpoint,
        iid: s.interactionId,
        env: s.environment,
        at: s.startedAt,
      }),
    );
  }

  setUpstreamSessionId(sessionKey: string, upstreamSessionId: string, seg = 0): void {
    this.guard(() => {
      if (segmentOf({ seg }) === null) {
        logger.warn({ sessionKey, seg }, 'upstream session id with an invalid segment ignored');
        return;
      }
      this.push({ t: 'upstream', k: sessionKey, usid: upstreamSessionId, seg });
    });
  }

  recordUsage(e: UsageRecord): boolean {
    let accepted = false;
    this.guard(() => {
      const seg = segmentOf(e);
      if (!Number.isInteger(e.seq) || seg === null) {
        logger.warn(
          { sessionKey: e.sessionKey, seq: e.seq, seg: e.seg },
          'usage event with invalid seq or segment ignored',
        );
        return;
      }
      if (!creditsInRange(e.credits)) return this.refuse(e);
      this.push({ t: 'usage', k: e.sessionKey, seq: e.seq, seg, kind: e.kind, micro: toMicro(e.credits), at: e.at });
      accepted = true;
    });
    return accepted;
  }

  /** A figure no total may count: logged and counted, and the session marked estimated. */
  private refuse(e: UsageRecord): void {
    const reason = typeof e.credits === 'number' && !Number.isNaN(e.credits) ? 'out_of_range' : 'unreadable';
    metrics.usageRefused.inc({ reason });
    logger.warn(
      {
        event: 'usage_refused',
        reason,
        sessionKey: e.sessionKey,
        seq: e.seq,
        kind: e.kind,
        credits: e.credits,
        max: MAX_CREDITS_PER_MESSAGE,
      },
      "upstream usage figure refused; the session's usage is estimated",
    );
    this.push({ t: 'refused', k: e.sessionKey, at: e.at });
  }

  sessionEnded(e: SessionEnd): void {
    // The session counts speech_gateway_credits_total itself; the ledger only records.
    this.guard(() => {
      const mediaMs = Number.isFinite(e.mediaSeconds) ? toMediaMs(e.mediaSeconds) : 0;
      const coverage = e.coverage ? coverageMs(e.coverage) : null;
      this.push({ t: 'end', k: e.sessionKey, outcome: e.outcome, mediaMs, at: e.endedAt, ...coverage });
    });
  }

  async flush(): Promise<void> {
    this.kick();
    while (this.running) await this.running;
  }

  async close(): Promise<void> {
    await this.flush();
  }

  private guard(f: () => void): void {
    try {
      f();
    } catch (err) {
      logger.error({ err }, 'usage ledger: event not recorded');
    }
  }

  private push(e: LedgerEvent): void {
    this.queue.push(e);
    this.kick();
  }

  private kick(): void {
    if (this.running) return;
    let failed = false;
    this.running = this.writeQueued()
      .catch((err) => {
        failed = true;
        logger.error({ err }, 'usage ledger write failed');
      })
      .finally(() => {
        this.running = null;
        // A replay that failed unexpectedly leaves the journal full with nothing queued: it is retried
        // too, not left until the next event.
        const journaled = (this.journal?.depth ?? 0) > 0;
        if (this.queue.length === 0 && !(failed && journaled)) return;
        // After an unexpected failure (disk, bug) retry later rather than spin.
        if (failed) setTimeout(() => this.kick(), 1000).unref();
        else this.kick();
      });
  }

  private async writeQueued(): Promise<void> {
    // Let callers in the same tick enqueue first, so they travel in one batch.
    await Promise.resolve();
    for (;;) {
      if (this.journal && this.journal.depth > 0 && this.health.healthy) await this.replay(this.journal);
      if (this.queue.length === 0) return;
      const batch = this.queue.splice(0, BATCH);
      if ((!this.journal || this.journal.depth === 0) && this.health.healthy) {
        try {
          await this.store.apply(batch);
          continue;
        } catch (err) {
          if (!(err instanceof StoreUnavailable) || !this.journal) throw err;
          this.health.markFailed(err.message);
        }
      }
      await this.toJournal(batch);
    }
  }

  private async toJournal(batch: LedgerEvent[]): Promise<void> {
    if (!this.journal) {
      logger.error({ events: batch.length }, 'usage store unavailable and no journal; events lost');
      return;
    }
    let refused: number;
    try {
      refused = await this.journal.append(batch);
    } catch (err) {
      logger.error({ err, events: batch.length }, 'usage journal write failed; events lost');
      refused = batch.length;
    }
    if (refused > 0) {
      // Exactly the events not in the journal: a partly failed write keeps and counts the whole records it wrote.
      metrics.journalDropped.inc(refused);
      logger.error({ refused }, 'usage journal full or not writable; newest events refused');
    }
    metrics.journalDepth.set(this.journal.depth);
  }

  private async replay(journal: Journal): Promise<void> {
    const events = await journal.readAll();
    for (let i = 0; i < events.length; i += BATCH) {
      try {
        await this.store.apply(events.slice(i, i + BATCH));
      } catch (err) {
        if (!(err instanceof StoreUnavailable)) throw err;
        this.health.markFailed(err.message);
        await journal.rewrite(events.slice(i)); // keep what did not make it, in order
        metrics.journalDepth.set(journal.depth);
        return;
      }
    }
    await journal.clear();
    metrics.journalDepth.set(0);
    logger.info({ events: events.length }, 'usage journal replayed into redis');
  }
}
