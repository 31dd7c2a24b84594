// A session's lifecycle as one stream of events. The session says what happened; the ledger, the
// metrics and the logs each subscribe (observeSession) instead of being called from all over the
// session, and the next consumer (an audit trail, a budget) attaches here too.
import type { AudioStats } from '../audio/index.js';
import type { Outcome } from '../usage/index.js';
import type { CoverageFigures } from './coverage.js';

export type LifecycleEvent =
  | { type: 'opened'; restored: boolean }
  /** the session's config or its tenant slot was refused: it ends without an upstream session */
  | { type: 'refused'; reason: 'config_denied' | 'config_rejected' | 'tenant_limit' }
  /** restored here from another replica's record: after its handover, or after its owner died */
  | { type: 'taken_over'; from: 'handover' | 'crash'; segment: number }
  /** an upstream usage figure; `recorded`: the ledger took it (else the client is told a figure it holds) */
  | { type: 'usage'; kind: 'delta' | 'final'; credits: number; segment: number; recorded: boolean }
  /** a valid config arrived: the tenant's cap bounds the session from now on */
  | { type: 'configured' }
  /** a final transcript reached the client: its finals now cover the client's stream up to `until` */
  | { type: 'final_delivered'; until: number }
  /** out of this process: ended here, or gone on on another replica */
  | { type: 'finished' }
  /** counted and billed from here: the first CONFIG_ACCEPTED, or a session taken over from another replica */
  | { type: 'live'; restored: boolean; at: number }
  | { type: 'config_accepted'; latencySeconds: number }
  /** the upstream session answered but returned no transcript for the speech sent: it is replaced */
  | { type: 'upstream_stalled' }
  | { type: 'upstream_segment'; upstreamSessionId: string; segment: number }
  | { type: 'resumed'; missed: number; audioBytes: number }
  | { type: 'handed_over'; segment: number; finalUntil: number; missed: number; credits: number; live: boolean }
  | {
      type: 'ended';
      outcome: Outcome;
      /** the ledger session is this process's to end (not one another replica took over) */
      owned: boolean;
      live: boolean;
      mediaSeconds: number;
      credits: number;
      estimated: boolean;
      durationSeconds: number;
      upstreamSessionId?: string;
      stats?: AudioStats;
      /** speech forwarded, the part final transcripts cover, the gaps (a live session's) */
      coverage?: CoverageFigures;
      at: number;
    };

export type LifecycleListener = (e: LifecycleEvent) => void;

export class Lifecycle {
  private readonly listeners: LifecycleListener[] = [];

  /** `failed`: a listener threw (told, never thrown on: the session's own work goes on). */
  constructor(private readonly failed: (err: unknown, e: LifecycleEvent) => void) {}

  on(listener: LifecycleListener): void {
    this.listeners.push(listener);
  }

  /** Every listener hears every event; one that throws does not keep it from the others. */
  emit(e: LifecycleEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.failed(err, e);
      }
    }
  }
}
