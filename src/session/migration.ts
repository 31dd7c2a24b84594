// How a session moves between replicas, on this replica's side: what it gives a successor (its
// snapshot), the drain's handover (which waits for the upstream session's end, then leaves with what
// the client has not had), and a session taken over from another replica's record (restore).
import type { SessionConfig } from './config.js';
import { CLOSE } from '../protocol/index.js';
import { HANDED_OVER_REASON } from './machine.js';
import type { Restore, SessionSnapshot } from './resume.js';
import type { Driver, Parts } from './types.js';
import type { UpstreamSide } from './upstream-side.js';

export type HandedOver = SessionSnapshot & { missed: string[] };

export class Migration {
  /** the drain hands this session over: resolved with its snapshot once its upstream session ended */
  private handover?: (r: HandedOver | undefined) => void;

  constructor(
    private readonly p: Parts,
    private readonly config: SessionConfig,
    private readonly upstream: UpstreamSide,
    private readonly driver: Driver,
  ) {}

  /** Taken over: the config is the one the first replica validated, audio goes into a pipeline that
   * has parsed the container headers and skips to the next boundary (the client continues its stream
   * without headers), and a new upstream session opens as a reconnection does once audio comes. The
   * client's output waits until its socket sends the config (as for any resume). After a handover the
   * pipeline is also put where the last replica's stopped (mid-Cluster): nothing is skipped. */
  restore(r: Restore, becomeLive: () => void): void {
    const { verdict, plan } = this.config.check(r.config);
    if (!verdict.ok) throw new Error(`restored config refused: ${verdict.reason}`);
    const { timers, intake, usage, output, stream } = this.p;
    stream.plan = plan;
    timers.clear('config_deadline');
    this.config.acceptedAt = r.acceptedAt; // the time limit goes on from the session's first acceptance
    this.p.speech.restore(r.coverage, r.finalUntil); // one session, one account of its speech
    becomeLive();
    this.p.lifecycle.emit({ type: 'taken_over', from: r.crash ? 'crash' : 'handover', segment: r.segment + 1 });
    this.config.accepted = r.accepted;
    const resume = r.crash ? r.resume : undefined; // the client resends from there: nothing the finals lack is lost
    intake.bytesIn = resume?.audioBytes ?? r.audioBytes;
    usage.restore(r.seq, r.credits, r.segment);
    this.upstream.finalNoted = r.finalUntil;
    output.hold(r.missed);
    this.upstream.open(verdict.upstreamConfig, r);
    stream.restore(r, intake.bytesIn, resume?.mediaReceived ?? r.mediaReceived);
  }

  /** What another replica needs to go on with this session; undefined while it has none to give
   * (not configured yet, no media yet, or a stream only this replica can parse: transcoded, MP3...).
   * Its finals end where the client's socket was given them (a successor after a crash goes on from
   * there); `leaving` (a handover): where this replica's end, those kept for the client going along
   * as `missed`. */
  snapshot(leaving = false): SessionSnapshot | undefined {
    const { stream, intake, usage } = this.p;
    const handable = stream.handable();
    const link = this.upstream.link;
    if (!handable || !link) return undefined;
    return {
      config: this.config.client,
      accepted: this.config.accepted,
      acceptedAt: this.config.acceptedAt,
      coverage: this.p.speech.state(),
      ...handable,
      offset: link.offset,
      finalUntil: leaving ? link.finalUntil : this.upstream.finalGiven,
      audioBytes: intake.bytesIn,
      mediaReceived: stream.mediaReceived,
      segment: link.segment,
      seq: usage.lastSeq,
      credits: usage.soFar,
      resume: stream.resumePoint(link, intake.bytesIn),
    };
  }

  /** Starts the handover (see Session.handOver); resolves once the session left, or it could not. */
  handOver(): Promise<HandedOver | undefined> {
    if (!this.snapshot()) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.handover = resolve;
      this.driver.guard(() => this.driver.dispatch({ type: 'handover_started' }));
      if (this.driver.state.migration !== 'handing_over' && this.handover === resolve) this.fail();
    });
  }

  /** A handover under way is not done: the session drains or ends here instead. */
  fail(): void {
    const done = this.handover;
    this.handover = undefined;
    done?.(undefined);
  }

  /** Out of this process without ending the ledger session or releasing the slot; a handover under way
   * gets the snapshot, with the output its client has not had. `live`: the ledger session had begun. */
  leave(live: boolean): void {
    const { stream, output, timers, lifecycle, usage } = this.p;
    const continuation = stream.continuation();
    const snapshot = this.snapshot(true);
    const missed = output.release().map((m) => m.toString());
    output.close(CLOSE.serviceRestart, HANDED_OVER_REASON); // handed over while its close waited
    timers.clearAll();
    this.upstream.close();
    stream.pipeline?.close();
    lifecycle.emit({
      type: 'handed_over',
      segment: snapshot?.segment ?? 0,
      finalUntil: snapshot?.finalUntil ?? 0,
      missed: missed.length,
      credits: usage.total,
      live,
    });
    lifecycle.emit({ type: 'finished' });
    const done = this.handover;
    this.handover = undefined;
    if (done && snapshot) done({ ...snapshot, continuation, missed });
    else done?.(undefined);
  }
}
