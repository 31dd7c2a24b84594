// What each effect of the session machine does, and through which collaborator: the one table from
// the machine's decisions to the session's work.
import type { Effect, Outcome } from './machine.js';
import { HANDOVER_CLOSE_WAIT_MS } from './resume.js';
import type { Driver, Parts } from './types.js';
import type { UpstreamSide } from './upstream-side.js';

export interface EffectTargets extends Parts {
  upstream: UpstreamSide;
  driver: Driver;
  leave(): void;
  failHandover(): void;
  finish(outcome: Outcome): void;
}

export function performEffect(e: Effect, t: EffectTargets): void {
  switch (e.type) {
    case 'send_client':
      return t.output.send(JSON.stringify(e.message));
    case 'relay_client':
      return t.output.relay(e.data);
    case 'close_client':
      return t.output.close(e.code, e.reason);
    case 'tell_client_now':
      return t.output.sendNow(JSON.stringify(e.message));
    case 'await_delivery':
      return t.output.whenDelivered(() => t.driver.guard(() => t.driver.dispatch({ type: 'client_delivered' })));
    case 'hold_output':
      t.output.hold(t.output.undelivered());
      return t.log.info({ event: 'client_detached' }, 'client dropped; waiting for it to resume');
    case 'keep_output':
      return t.output.hold();
    case 'send_kept_output':
      return void t.output.sendHeld();
    case 'open_upstream':
      return t.upstream.openWithSlot(e.config);
    case 'forward_audio':
      return t.intake.forward(e.audio);
    case 'flush_upstream':
      return t.intake.flushes.ask();
    case 'end_upstream':
      return t.intake.end();
    case 'close_upstream':
      t.intake.drop();
      return t.upstream.close();
    case 'reconnect_upstream':
      return t.upstream.reconnect();
    case 'open_restored_upstream':
      return t.upstream.openRestored();
    default:
      return performMoveOrTimer(e, t);
  }
}

type MoveOrTimer = Extract<
  Effect,
  {
    type:
      | 'clear_timer'
      | 'start_resume_grace'
      | 'start_handover_wait'
      | 'hurry_audio'
      | 'give_up_slot'
      | 'fail_handover'
      | 'leave'
      | 'finish';
  }
>;

/** The timers, the move between replicas and the end. */
function performMoveOrTimer(e: MoveOrTimer, t: EffectTargets): void {
  switch (e.type) {
    case 'clear_timer':
      return t.timers.clear(e.timer);
    case 'start_resume_grace':
      return t.driver.timer('resume_grace', t.deps.settings.resumeGraceSeconds * 1000, { type: 'resume_grace' });
    case 'start_handover_wait':
      return t.driver.timer('handover_wait', HANDOVER_CLOSE_WAIT_MS, { type: 'handover_close' });
    case 'hurry_audio':
      t.timers.clear('handover_wait');
      t.intake.flushInbox();
      return t.stream.pipeline?.hurry();
    case 'give_up_slot':
      return void t.deps.limiter.handOff(t.info.tenant, t.info.sessionKey, 0); // renewed by the new owner now
    case 'fail_handover':
      return t.failHandover();
    case 'leave':
      return t.leave();
    case 'finish':
      return t.finish(e.outcome);
    default: {
      const unknown: never = e; // every effect has its line above
      return unknown;
    }
  }
}
