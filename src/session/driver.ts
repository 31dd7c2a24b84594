// The session's machine at run time: its state and the one place that changes it (each event through
// `transition`, then its effects performed in order), timers that feed it events, and the guard that
// turns an exception in any callback into the end of this one session, never of the process.
import { CLOSE } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import { crashed, transition, type Effect, type Outcome, type SessionEvent, type SessionState } from './machine.js';
import type { Driver, Parts, TimerName } from './types.js';

export interface DriverTargets {
  /** the session's parts (built after the driver, which they are given) */
  parts(): Parts;
  perform(effect: Effect): void;
  /** the session ends here: recorded, told, given up */
  finish(outcome: Outcome): void;
}

export class MachineDriver implements Driver {
  constructor(
    private current: SessionState,
    private readonly t: DriverTargets,
  ) {}

  get state(): SessionState {
    return this.current;
  }

  dispatch(event: SessionEvent): void {
    const { state, effects } = transition(this.current, event);
    this.current = state;
    for (const effect of effects) this.t.perform(effect);
  }

  guard(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.crash(err);
    }
  }

  timer(name: TimerName, ms: number, event: SessionEvent): void {
    this.t.parts().timers.start(name, ms, () =>
      this.guard(() => {
        if (event.type === 'upstream_failed') metrics.upstreamFailures.inc({ cause: 'timeout' });
        this.dispatch(event);
      }),
    );
  }

  crash(err: unknown): void {
    const { log } = this.t.parts();
    log.error({ event: 'session_crash', err }, 'session callback threw; ending the session');
    metrics.internalErrors.inc({ where: 'session' });
    try {
      this.dispatch({
        type: 'internal_error',
        details: 'the gateway failed while handling this session; open a new one',
      });
    } catch (again) {
      // The graceful path threw too: close both sides and record the session as it stands.
      log.error({ event: 'session_crash', err: again }, 'ending the session failed; closing it');
      this.current = crashed(this.current);
      const last: Effect[] = [
        { type: 'close_upstream' },
        { type: 'close_client', code: CLOSE.internal, reason: 'internal error' },
      ];
      for (const effect of last) {
        try {
          this.t.perform(effect);
        } catch {
          /* already failing */
        }
      }
      this.t.finish('error');
    }
  }
}
