// A session's collaborators, built once and wired to each other and to its machine: the log and the
// lifecycle stream (with the ledger, metrics and log subscribed), timers on the injected clock, usage,
// the client's output, the audio stream and the audio intake. What reaches the upstream side is wired
// through `w`, which the session's upstream side serves once it exists.
import type { ReplayKind, Unit } from '../audio/index.js';
import { metrics } from '../telemetry/index.js';
import { ClientOutput, type ClientSink } from './client-output.js';
import { AudioIntake, type Control } from './intake.js';
import { Lifecycle } from './lifecycle.js';
import { observeSession } from './observers.js';
import { SpeechWatch } from './speech-watch.js';
import { ClientStream } from './stream.js';
import { systemClock, Timers } from './timers.js';
import type { Driver, Parts, SessionDeps, SessionInfo, TimerName } from './types.js';
import { UsageTally } from './usage-tally.js';

export interface Wiring {
  driver: Driver;
  /** a unit on its way upstream (the link keeps it for a replay, and may rewrite it) */
  unit(u: Unit, kind: ReplayKind): Unit;
  /** a paced frame: upstream now */
  frame(frame: Buffer): void;
  /** client audio out of the inbox */
  deliver(audio: Buffer): void;
  sendControl(message: Control): void;
  /** what was kept for the client went to its socket */
  given(): void;
}

export function assemble(deps: SessionDeps, info: SessionInfo, client: ClientSink, w: Wiring): Parts {
  const log = deps.logger.child({
    session: info.sessionKey,
    tenant: info.tenant,
    endpoint: info.endpoint,
    environment: info.environment,
    interaction: info.interactionId,
  });
  const lifecycle = new Lifecycle((err, e) => {
    metrics.internalErrors.inc({ where: 'session' });
    log.error(
      { event: 'lifecycle_listener_failed', on: e.type, err },
      'a lifecycle listener threw; the session goes on',
    );
  });
  observeSession(lifecycle, info, deps.ledger, log);
  deps.observe?.(info, (l) => lifecycle.on(l));
  const { driver } = w;
  const output = new ClientOutput(client, {
    tooSlow: () =>
      driver.guard(() =>
        driver.dispatch({ type: 'client_too_slow', details: 'the client is not reading its messages' }),
      ),
    heldOverflow: () => driver.guard(() => driver.dispatch({ type: 'resume_grace' })),
    given: w.given,
  });
  const speech = new SpeechWatch(deps.settings.stallSpeechSeconds ?? 10);
  const stream = new ClientStream({
    chunkMs: deps.settings.chunkMs,
    pace: deps.settings.pace,
    maxBufferedBytes: deps.settings.maxBufferedAudioBytes,
    log,
    unit: w.unit,
    frame: w.frame,
    packet: (bytes, offset, length, start, duration) => speech.packet(bytes, offset, length, start, duration),
    failed: (errorId, details) => driver.guard(() => driver.dispatch({ type: 'audio_failed', errorId, details })),
  });
  const intake = new AudioIntake({
    maxBufferedBytes: deps.settings.maxBufferedAudioBytes,
    pipeline: () => stream.pipeline,
    over: () => driver.state.phase === 'closed',
    deliver: w.deliver,
    sendControl: (message) => driver.guard(() => w.sendControl(message)),
    failed: (details) =>
      driver.guard(() => driver.dispatch({ type: 'audio_failed', errorId: 'AUDIO_MALFORMED', details })),
    tell: (text) => output.send(text),
  });
  const timers = new Timers<TimerName>(deps.clock ?? systemClock);
  const usage = new UsageTally(deps.ledger, info.sessionKey, (f) => lifecycle.emit({ type: 'usage', ...f }));
  return { info, deps, log, lifecycle, timers, output, intake, usage, stream, speech };
}
