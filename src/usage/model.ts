// Shared vocabulary of the usage ledger: public types, the events that flow from the ledger to
// a store (and through the on-disk journal), stored records, and exact-number conversions.
import type { Endpoint } from '../protocol/index.js';
import { logger, metrics } from '../telemetry/index.js';

/** How a session ended: what really happened, e.g. `upstream_timeout` even when the client had asked to end. */
export type Outcome =
  | 'ended'
  | 'client_gone'
  | 'client_slow'
  | 'upstream_lost'
  | 'upstream_timeout'
  | 'config_denied'
  | 'config_rejected'
  | 'config_timeout'
  | 'error'
  | 'time_limit'
  | 'shutdown';
export type Granularity = 'hour' | 'day';

export interface SessionStart {
  sessionKey: string;
  tenant: string;
  endpoint: Endpoint;
  interactionId?: string;
  /** the data-residency environment (eu, us...) the session ran in; sessions always give it, the
   * ledger takes a start without one as it took those before environments (its row says null) */
  environment?: string;
  startedAt: number;
}

/** One ledger event, self-contained and JSON-serialisable (it is what the journal stores). */
export type LedgerEvent =
  /** `env`: the environment; absent from events (journal lines) written before environments. */
  | { t: 'start'; k: string; tenant: string; endpoint: Endpoint; iid?: string; env?: string; at: number }
  | { t: 'upstream'; k: string; usid: string; seg?: number }
  | { t: 'usage'; k: string; seq: number; seg?: number; kind: 'delta' | 'final'; micro: number; at: number }
  /** The coverage fields (coverage.ts in session/, as whole milliseconds of the client's stream) are
   * absent from events written before coverage and from sessions that never went live. */
  | ({ t: 'end'; k: string; outcome: Outcome; mediaMs: number; at: number } & Partial<CoverageMs>)
  /** A credit figure of the session was refused: its usage is estimated from then on. */
  | { t: 'refused'; k: string; at: number };

/** What a session ended with of its speech, as the session measured it (seconds of the client's
 * stream): the speech it forwarded, the part final transcripts cover, the uncovered stretches. */
export interface SpeechCoverage {
  speechSeconds: number;
  coveredSeconds: number;
  gaps: ReadonlyArray<{ start: number; end: number; speechSeconds: number }>;
  /** gaps not listed */
  moreGaps: number;
}

/** A gap as stored: [startMs, endMs, speechMs] of the client's stream. */
export type GapMs = [number, number, number];

/** A session's coverage as stored: integers only. */
export interface CoverageMs {
  speechMs: number;
  coveredMs: number;
  gaps: GapMs[];
  moreGaps: number;
}

/** Gaps a session record lists; the rest are counted in moreGaps. */
export const MAX_GAPS = 100;

/** A bucket as stored: integers only (micro-credits, milliseconds of media and of speech). */
export interface BucketRow {
  start: number;
  micro: number;
  sessions: number;
  mediaMs: number;
  /** speech forwarded by the sessions that ended with their coverage, and the part finals covered */
  speechMs: number;
  coveredMs: number;
}

export const emptyBucket = (start: number): BucketRow => ({
  start,
  micro: 0,
  sessions: 0,
  mediaMs: 0,
  speechMs: 0,
  coveredMs: 0,
});

/** Adds b's figures to a. */
export function addBucket(a: BucketRow, b: BucketRow): void {
  a.micro += b.micro;
  a.sessions += b.sessions;
  a.mediaMs += b.mediaMs;
  a.speechMs += b.speechMs;
  a.coveredMs += b.coveredMs;
}

/**
 * Upstream sessions one gateway session may use in turn (reconnects, resumes). It bounds the
 * stores' per-event work; an event of a later segment is refused.
 */
export const MAX_SEGMENTS = 256;

/** The segment of an event, or null when out of range. Journal lines from before segments have none: 0. */
export function segmentOf(e: { seg?: unknown }): number | null {
  const seg = e.seg ?? 0;
  return Number.isInteger(seg) && (seg as number) >= 0 && (seg as number) < MAX_SEGMENTS ? (seg as number) : null;
}

/** One upstream session's part: its final figure, or the sum of its deltas while none came (estimated). */
export interface SegmentRow {
  upstreamSessionId: string | null;
  micro: number;
  estimated: boolean;
}

/** A session record as stored, integers only. */
export interface SessionRow {
  sessionKey: string;
  upstreamSessionId: string | null;
  tenant: string;
  endpoint: Endpoint;
  interactionId: string | null;
  /** null for a session recorded before environments were */
  environment: string | null;
  start: number;
  end: number | null;
  micro: number;
  estimated: boolean;
  outcome: Outcome | null;
  mediaMs: number | null;
  /** null while open, and for a session that ended without its coverage (never live, or recorded before) */
  speechMs: number | null;
  coveredMs: number | null;
  gaps: GapMs[];
  moreGaps: number;
  segments: SegmentRow[];
}

/**
 * The session's figures from its segments (in segment order): credits are their sum, estimated
 * when any lacks its final figure, none exists, or a figure was refused, and the upstream id is
 * the first one known.
 */
export function sessionFigures(
  segments: SegmentRow[],
  refused = false,
): Pick<SessionRow, 'upstreamSessionId' | 'micro' | 'estimated' | 'segments'> {
  return {
    upstreamSessionId: segments.find((s) => s.upstreamSessionId !== null)?.upstreamSessionId ?? null,
    micro: segments.reduce((sum, s) => sum + s.micro, 0),
    estimated: refused || segments.length === 0 || segments.some((s) => s.estimated),
    segments,
  };
}

export interface SessionPage {
  rows: SessionRow[];
  next: SessionCursor | null;
}
export interface SessionCursor {
  start: number;
  key: string;
}

export const PAGE_SIZE = 100;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
export const granularityMs = (g: Granularity): number => (g === 'hour' ? HOUR_MS : DAY_MS);
/** Buckets are UTC-aligned; a session's bucket is the one holding its start time. */
export const bucketStart = (t: number, g: Granularity): number => t - (t % granularityMs(g));

/**
 * The largest credit figure one upstream usage message may carry. A figure below 0, above it, or
 * not a number is refused: no total counts it and the session's usage is marked estimated.
 */
export const MAX_CREDITS_PER_MESSAGE = 1_000_000;
export const MAX_MICRO_PER_MESSAGE = MAX_CREDITS_PER_MESSAGE * 1_000_000;
/** Every stored total (micro-credits, milliseconds, counts) stays an exact integer in a double. */
export const MAX_TOTAL = Number.MAX_SAFE_INTEGER;

export const creditsInRange = (credits: unknown): credits is number =>
  typeof credits === 'number' && credits >= 0 && credits <= MAX_CREDITS_PER_MESSAGE;
/** An integer a store may hold: 0 ≤ n ≤ max. */
export const storable = (n: unknown, max = MAX_TOTAL): n is number =>
  Number.isInteger(n) && (n as number) >= 0 && (n as number) <= max;

/** The coverage an end event holds, or null: absent, or any figure out of range (covered past the
 * speech, a gap ending before it starts or holding more speech than its span, too many gaps). */
export function coverageOf(e: Partial<CoverageMs>): CoverageMs | null {
  const { speechMs, coveredMs, gaps, moreGaps } = e;
  if (!storable(speechMs) || !storable(coveredMs) || coveredMs > speechMs || !storable(moreGaps)) return null;
  if (!Array.isArray(gaps) || gaps.length > MAX_GAPS || !gaps.every(isGapMs)) return null;
  return { speechMs, coveredMs, gaps, moreGaps };
}

export function isGapMs(g: unknown): g is GapMs {
  if (!Array.isArray(g) || g.length !== 3 || !g.every((n) => storable(n))) return false;
  const [start, end, speech] = g as GapMs;
  return start <= end && speech <= end - start;
}

/** A store refused an event whose figures would not fit (a total past 2^53, a figure out of range). */
export function refusedByStore(e: LedgerEvent | undefined): void {
  metrics.usageRefused.inc({ reason: 'overflow' });
  logger.warn(
    { event: 'usage_refused', reason: 'overflow', sessionKey: e?.k, type: e?.t },
    'usage event refused: a total would leave the exact range; the session is estimated',
  );
}

// Credits are floats on the wire; sums of floats drift, so the ledger adds integer micro-credits.
export const toMicro = (credits: number): number => Math.round(credits * 1e6);
export const fromMicro = (micro: number): number => micro / 1e6;
export const toMediaMs = (seconds: number): number => Math.round(seconds * 1000);
export const fromMediaMs = (ms: number): number => ms / 1000;

/** Where the ledger writes; throws StoreUnavailable when the backing service cannot take it now. */
export interface UsageStore {
  apply(events: LedgerEvent[]): Promise<void>;
  buckets(q: {
    tenant: string;
    endpoints: readonly Endpoint[];
    granularity: Granularity;
    from: number;
    to: number;
  }): Promise<BucketRow[]>;
  sessions(q: {
    tenant: string;
    from: number;
    to: number;
    after: SessionCursor | null;
    limit: number;
  }): Promise<SessionPage>;
  tenants(): Promise<string[]>;
  /** Every tenant's cumulative credits in the ledger, in the order the tenants first started a session. */
  creditTotals(): Promise<CreditTotal[]>;
}

/** A tenant's cumulative credits as the ledger recorded them (they move with its buckets, never expire). */
export interface CreditTotal {
  tenant: string;
  micro: number;
}

export class StoreUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUnavailable';
  }
}
