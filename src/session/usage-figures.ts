// The session's usage as the ledger counts it, for the client's `delta_usage` and `usage`. A session
// may use several upstream sessions in turn (reconnections, replicas taking it over); each counts its
// final figure, or the sum of its deltas while none came, and the session is their sum. The client's
// `usage` is that sum; its `delta_usage` is what the sum rose by since the client was last told, so
// its deltas add up to the ledger's figure too. Integer micro-credits, as the ledger adds them.
import { fromMicro, toMicro } from '../usage/index.js';

/** What another replica needs to go on telling the client the session's figures (micro-credits). */
export interface CreditsSoFar {
  /** the session's credits over every upstream session so far */
  total: number;
  /** what the client's delta_usage messages added up to */
  told: number;
}

export class SessionCredits {
  /** the upstream sessions before the current one */
  private before = 0;
  private segment = -1;
  private deltas = 0;
  private final?: number;
  private told = 0;

  /** A session taken over: `so` counts every upstream session up to `segment`. */
  constructor(so?: CreditsSoFar, segment = -1) {
    this.before = so?.total ?? 0;
    this.told = so?.told ?? 0;
    this.segment = segment;
  }

  /** A figure the ledger accepted for upstream session `segment` (later ones come after earlier ones). */
  add(segment: number, kind: 'delta' | 'final', credits: number): void {
    if (segment !== this.segment) {
      this.before += this.final ?? this.deltas;
      this.segment = segment;
      this.deltas = 0;
      this.final = undefined;
    }
    if (kind === 'final') this.final = toMicro(credits);
    else this.deltas += toMicro(credits);
  }

  get soFar(): CreditsSoFar {
    return { total: this.before + (this.final ?? this.deltas), told: this.told };
  }

  /** The credits a client message of this kind carries: the session's total, or what it rose by. */
  forClient(kind: 'delta_usage' | 'usage'): number {
    const { total } = this.soFar;
    if (kind === 'usage') return fromMicro(total);
    const delta = Math.max(0, total - this.told); // a final below its deltas: none, never a negative one
    this.told += delta;
    return fromMicro(delta);
  }
}
