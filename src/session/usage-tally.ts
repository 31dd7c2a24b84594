// The session's usage messages from the upstream: each figure recorded in the ledger (in order, by
// upstream segment), and what the client is told instead of the upstream session's own figure: the
// session's figures over every upstream session (SessionCredits).
import type { UsageLedger } from '../usage/index.js';
import { SessionCredits, type CreditsSoFar } from './usage-figures.js';

export type UsageKind = 'delta_usage' | 'usage';

/** A JSON object's fields, or none (a message that does not parse is relayed with the figures alone). */
function fieldsOf(data: Buffer): Record<string, unknown> {
  try {
    const v = JSON.parse(data.toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export class UsageTally {
  private seq = 0;
  private final?: number;
  private deltas = 0;
  private credits = new SessionCredits();

  constructor(
    private readonly ledger: UsageLedger,
    private readonly sessionKey: string,
    /** each figure as it came, and whether the ledger took it */
    private readonly told: (f: {
      kind: 'delta' | 'final';
      credits: number;
      segment: number;
      recorded: boolean;
    }) => void,
  ) {}

  /** A session taken over: its last usage seq and its credits up to upstream segment `segment`. */
  restore(seq: number, soFar: CreditsSoFar | undefined, segment: number): void {
    this.seq = seq;
    this.credits = new SessionCredits(soFar, segment);
  }

  get lastSeq(): number {
    return this.seq;
  }

  get soFar(): CreditsSoFar {
    return this.credits.soFar;
  }

  /** No final usage from the upstream (yet): the ledger has the provisional sum, marked estimated. */
  get estimated(): boolean {
    return this.final === undefined;
  }

  /** This process's upstream figure: the final one, else the deltas so far. */
  get total(): number {
    return this.final ?? this.deltas;
  }

  /**
   * Records the upstream's figure and returns the message as it came, or, when the ledger refused its
   * figure (out of range, not a number), the same message with a figure the ledger holds: 0 for a
   * delta, the provisional sum for a final. The client still gets its delta_usage after `flushed`
   * and its usage before `ended`.
   */
  record(kind: UsageKind, data: Buffer, segment: number): Buffer {
    const fields = fieldsOf(data);
    const credits = typeof fields.credits === 'number' ? fields.credits : Number.NaN;
    const final = kind === 'usage';
    const recorded = this.ledger.recordUsage({
      sessionKey: this.sessionKey,
      seq: ++this.seq,
      seg: segment,
      kind: final ? 'final' : 'delta',
      credits,
      at: Date.now(),
    });
    this.told({ kind: final ? 'final' : 'delta', credits, segment, recorded });
    if (recorded) {
      if (final) this.final = credits;
      else this.deltas += credits;
      this.credits.add(segment, final ? 'final' : 'delta', credits);
      return data;
    }
    return Buffer.from(JSON.stringify({ ...fields, type: kind, credits: final ? this.total : 0 }));
  }

  /** A usage message as the client gets it: the session's figures over every upstream session. */
  forClient(kind: UsageKind, data: Buffer): Buffer {
    return Buffer.from(JSON.stringify({ ...fieldsOf(data), type: kind, credits: this.credits.forClient(kind) }));
  }
}
