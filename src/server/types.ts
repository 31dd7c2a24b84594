// What the server's parts share: their dependencies, the state they read and change, and the data
// uWS keeps for each socket.
import type uWS from 'uWebSockets.js';
import type { AuditTrail } from '../audit/index.js';
import type { Authenticator, UpstreamCredentials } from '../auth/index.js';
import type { Cluster, HopOutbox, HopRelay, SessionRecord } from '../cluster/index.js';
import type { DemoOptions } from '../demo/index.js';
import type { ClientSink, Session, SessionDeps, SessionInfo, SessionSettings } from '../session/index.js';
import type { Logger } from '../telemetry/index.js';
import type { UsageApi } from '../usage/index.js';
import type { Inflow } from './inflow.js';
import type { UnconfiguredKey, UnconfiguredSockets } from './unconfigured.js';

/** One environment this gateway serves: its own auth server, upstream and upstream credentials. */
export interface ServedEnvironment {
  auth: Authenticator;
  upstreamWsBase: string;
  credentials: UpstreamCredentials;
}

/** The environments served, by name; a request without `environment` gets `defaultName`. */
export interface Environments {
  readonly defaultName: string;
  readonly served: ReadonlyMap<string, ServedEnvironment>;
}

/** A session's upstream and credentials are its environment's (environments.ts, sessionDeps): the
 * server has none of its own, so no session can fall back to another environment's. */
export interface ServerDeps extends Omit<SessionDeps, 'credentials' | 'settings'> {
  settings: Omit<SessionSettings, 'upstreamWsBase'>;
  /** session records, replica liveness, the internal hop */
  cluster: Cluster;
  host: string;
  /** the client port (PORT): the sockets, health, the demo */
  port: number;
  /** the admin port (ADMIN_PORT): metrics, the usage API, the internal hop */
  adminPort: number;
  environments: Environments;
  usageApi: UsageApi;
  /** every refusal, accepted socket and session step is recorded here */
  audit: AuditTrail;
  maxSessionsPerTenant: number;
  /** sockets open that have not sent a valid config, per token (0: no bound) */
  maxUnconfiguredPerToken: number;
  /** the same per token subject, a backstop above the per-token bound (0: no bound) */
  maxUnconfiguredPerSubject: number;
  /** uWS idleTimeout: a client silent this long (a ping went unanswered) is closed */
  clientIdleSeconds: number;
  logger: Logger;
  /** the browser demo at / (only with the embedded emulator) */
  demo?: DemoOptions;
}

export interface ServerState {
  readonly sessions: Set<Session>;
  /** set once by the drain: /readyz says 503, new sockets are closed with 1012 */
  draining: boolean;
  /** sessions opened with `resume=<key>`, by the key's hash (the name of its record, which the
   *  internal hop carries instead of the key), until they finish */
  readonly resumable: Map<string, Session>;
  /** hashes of the resume keys of new sessions whose sockets are being accepted here (resume-claim.ts) */
  readonly claiming: Set<string>;
  /** sockets accepted while another replica hands their session over, waiting to take it over here */
  readonly awaiting: Set<AwaitingSocket>;
  /** sockets that have not sent a valid config, per token and per token subject */
  readonly unconfigured: UnconfiguredSockets;
}

/** What every socket keeps, whatever its kind. */
interface SocketBase {
  info: SessionInfo;
  /** the client's frames, a budget per turn of the event loop (set at open) */
  inflow?: Inflow;
  closed: boolean;
}

/** A socket a session runs on here: the sink it gets at open, and the session once there is one. */
interface SessionSocket extends SocketBase {
  sink?: ClientSink;
  session?: Session;
}

/** A new session's socket. */
export interface NewSocket extends SessionSocket {
  kind: 'new';
  /** counted in the server's unconfigured sockets under this key until a valid config arrives */
  unconfigured?: UnconfiguredKey;
  /** the new session's resume key, claimed for it at the upgrade (resume-claim.ts) */
  claim?: string;
}

/** A resume of a session held on this replica: the socket takes it over. */
export interface ResumeSocket extends SessionSocket {
  kind: 'resume';
  resumeOf: Session;
}

/** The owner's end of the internal hop: a resume of a session held here, for a client on another replica. */
export interface HopSocket extends SessionSocket {
  kind: 'hop';
  resumeOf: Session;
  /** what this end sent that the relaying replica has not confirmed passing on */
  outbox: HopOutbox;
}

/** A session taken over from another replica's record (claimed for this replica). */
export interface RestoreSocket extends SessionSocket {
  kind: 'restore';
  restore: { record: SessionRecord; from: 'handover' | 'crash' };
}

/** A resume waiting for the session's owner to finish handing it over; restored here once it has
 * (it becomes a RestoreSocket: sockets.ts, restoreWaiting). */
export interface AwaitingSocket extends SocketBase {
  kind: 'awaiting';
  /** the client's frames while it waits; gone once the wait is over */
  held?: { frames: Array<{ data: ArrayBuffer; binary: boolean }>; bytes: number };
}

/** A resume carried to the replica that holds the session: frames go through this relay. */
export interface RelaySocket extends SocketBase {
  kind: 'relay';
  hop: HopRelay;
}

/** The data uWS keeps for each socket, by kind. */
export type SocketData = NewSocket | ResumeSocket | HopSocket | RestoreSocket | AwaitingSocket | RelaySocket;

export type Ws = uWS.WebSocket<SocketData>;
