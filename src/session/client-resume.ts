// A socket that takes the session over with its resume key: it replaces the old one, whose output
// waits from then on for the new socket's config; that config, if it is the session's, gets the first
// answer again (with where the audio stands), then what the client missed.
import { CLOSE, serverMessages } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import type { ClientSink } from './client-output.js';
import type { SessionConfig } from './config.js';
import { migrating } from './machine.js';
import type { Driver, Parts } from './types.js';

/** Audio the new socket sends before its config continues the stream, after what was lost in flight. */
export function attachClient(p: Parts, driver: Driver, sink: ClientSink): void {
  p.output.replace(sink, { code: CLOSE.replaced, reason: 'replaced by a newer connection with the same resume key' });
  p.output.hold();
  p.stream.pipeline?.gap(); // bytes sent just before the drop may never have arrived
  metrics.resumes.inc({ result: 'attached' });
  driver.dispatch({ type: 'client_resumed', viaHop: sink.whenDelivered !== undefined });
}

export function answerResumeConfig(p: Parts, config: SessionConfig, driver: Driver, configuration: unknown): void {
  const { output, intake, lifecycle } = p;
  if (!config.sameAsClient(configuration)) {
    metrics.resumes.inc({ result: 'config_differs' });
    const reason = 'configuration differs from the session being resumed';
    // This socket's own answer: not kept with the output the session keeps for its client.
    output.sendNow(JSON.stringify(serverMessages.configStatus('CONFIG_DENIED', { reason })));
    return output.close(CLOSE.configDenied, 'config differs from the resumed session');
  }
  if (migrating(driver.state)) {
    // A move under way keeps the output for the socket that takes the session over next: this one
    // gets its answer only, and what it missed goes there, once.
    output.sendNow(config.resumedAnswer(intake.bytesIn));
    return lifecycle.emit({ type: 'resumed', missed: 0, audioBytes: intake.bytesIn });
  }
  const missed = output.sendHeld(config.resumedAnswer(intake.bytesIn));
  lifecycle.emit({ type: 'resumed', missed, audioBytes: intake.bytesIn });
  driver.dispatch({ type: 'client_caught_up' });
}
