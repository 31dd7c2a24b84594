// What a session is given (its settings and dependencies, who its client is) and what its parts share:
// the collaborators each with one job, and the driver through which they feed the session's machine.
import type { UpstreamCredentials } from '../auth/index.js';
import type { Endpoint } from '../protocol/index.js';
import type { Logger } from '../telemetry/index.js';
import type { UpstreamLiveness } from '../upstream/index.js';
import type { SessionLimiter, UsageLedger } from '../usage/index.js';
import type { ClientOutput } from './client-output.js';
import type { AudioIntake } from './intake.js';
import type { Lifecycle, LifecycleListener } from './lifecycle.js';
import type { SessionEvent, SessionState } from './machine.js';
import type { SpeechWatch } from './speech-watch.js';
import type { ClientStream } from './stream.js';
import type { Clock, Timers } from './timers.js';
import type { LinkOptions, ReconnectPolicy, UpstreamLink } from './upstream-link.js';
import type { UsageTally } from './usage-tally.js';

export type TimerName = 'config_deadline' | 'time_limit' | 'upstream_answer' | 'resume_grace' | 'handover_wait';

export interface SessionSettings {
  upstreamWsBase: string;
  configTimeoutMs: number;
  streamMaxSeconds: number;
  chunkMs: number;
  pace: number;
  maxBufferedAudioBytes: number;
  /** how long to wait for the upstream's usage + ended once `end` has been sent to it */
  endTimeoutMs: number;
  /** the pings that find a half-open upstream; absent: none */
  upstreamLiveness?: UpstreamLiveness;
  /** how a session gets a new upstream session when its upstream is lost mid-session */
  reconnect: ReconnectPolicy;
  /** how long a dropped client with a resume key may take its session over again */
  resumeGraceSeconds: number;
  /** speech sent to an upstream session since its last transcript message that makes it stalled
   *  (STALL_SPEECH_SECONDS; 0: never); absent: 10 */
  stallSpeechSeconds?: number;
}

export interface SessionDeps {
  settings: SessionSettings;
  credentials: UpstreamCredentials;
  ledger: UsageLedger;
  limiter: SessionLimiter;
  logger: Logger;
  /** the session's timers run on it (tests give a fake one) */
  clock?: Clock;
  /** one more subscriber of each session's lifecycle, from its first event (the audit trail) */
  observe?: (info: SessionInfo, on: (listener: LifecycleListener) => void) => void;
  /** the upstream side (tests give a fake one); default: an UpstreamLink to the real service */
  createLink?: (o: LinkOptions) => Link;
}

/** What the session uses of its upstream link. */
export type Link = Pick<
  UpstreamLink,
  | 'open'
  | 'restore'
  | 'offset'
  | 'finalUntil'
  | 'segment'
  | 'resumePoint'
  | 'replayBytes'
  | 'unit'
  | 'sendAudio'
  | 'sendControl'
  | 'reconnect'
  | 'openRestored'
  | 'stalled'
  | 'close'
>;

export interface SessionInfo {
  /** the gateway's own id for this session (ledger, limiter, logs) */
  sessionKey: string;
  endpoint: Endpoint;
  tenant: string;
  interactionId?: string;
  /** the data-residency environment (eu, us...) whose auth server verified the client and whose upstream serves it */
  environment: string;
  clientToken: string;
  /** the client asked for the gateway's notices (query `notices=true`) */
  notices?: boolean;
  /** the client may drop and take the session over again with this key (query `resume=<key>`) */
  resumeKey?: string;
  /** the token's subject: a resume must present the same */
  subject?: string;
  /** the token's client (azp / client_id), for the audit trail */
  clientId?: string;
  /** the client's address at the upgrade (TRUSTED_PROXIES), for the audit trail */
  address?: string;
}

/** A session's collaborators, one job each, built once (parts.ts) and shared by its sides. */
export interface Parts {
  readonly info: SessionInfo;
  readonly deps: SessionDeps;
  readonly log: Logger;
  readonly lifecycle: Lifecycle;
  readonly timers: Timers<TimerName>;
  readonly output: ClientOutput;
  readonly intake: AudioIntake;
  readonly usage: UsageTally;
  readonly stream: ClientStream;
  readonly speech: SpeechWatch;
}

/** The session's machine as its sides see it: its state to read, events to feed it. */
export interface Driver {
  readonly state: SessionState;
  dispatch(event: SessionEvent): void;
  /** Runs a callback's work; an exception ends this one session, never the process. */
  guard(work: () => void): void;
  crash(err: unknown): void;
  /** A named timer that feeds `event` to the machine when it fires. */
  timer(name: TimerName, ms: number, event: SessionEvent): void;
}
