// What the server's parts share: their dependencies, the state they read and change, and the data
// uWS keeps for each socket.
import type uWS from 'uWebSockets.js';
import type { Authenticator } from '../auth/index.js';
import type { Cluster, HopOutbox, HopRelay, SessionRecord } from '../cluster/index.js';
import type { DemoOptions } from '../demo/index.js';
import type { ClientSink, Session, SessionDeps, SessionInfo } from '../session/index.js';
import type { Logger } from '../telemetry/index.js';
import type { UsageApi } from '../usage/index.js';
import type { Inflow } from './inflow.js';
import type { UnconfiguredSockets } from './unconfigured.js';

export interface ServerDeps extends SessionDeps {
  /** session records, replica liveness, the internal hop */
  cluster: Cluster;
  host: string;
  port: number;
  auth: Authenticator;
  usageApi: UsageApi;
  maxSessionsPerTenant: number;
  /** sockets open that have not sent a valid config, per token subject (0: no bound) */
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
  /** sessions opened with `resume=<key>`, by key, until they finish */
  readonly resumable: Map<string, Session>;
  /** resume keys of new sessions whose sockets are being accepted here (resume-claim.ts) */
  readonly claiming: Set<string>;
  /** sockets that have not sent a valid config, per token subject */
  readonly unconfigured: UnconfiguredSockets;
}

export interface SocketData {
  info: SessionInfo;
  /** counted in the server's unconfigured sockets under this key until a valid config arrives */
  unconfigured?: string;
  session?: Session;
  /** the new session's resume key, claimed for it at the upgrade (resume-claim.ts) */
  claim?: string;
  /** a resume: the session this socket takes over */
  resumeOf?: Session;
  /** a resume of a session taken over from another replica's record (claimed for this replica) */
  restore?: { record: SessionRecord; from: 'handover' | 'crash' };
  /** a resume waiting for the session's owner to finish handing it over: the client's frames, held */
  awaiting?: { frames: Array<{ data: ArrayBuffer; binary: boolean }>; bytes: number };
  sink?: ClientSink;
  /** a resume carried to the replica that holds the session: frames go through this relay */
  hop?: HopRelay;
  /** the owner's end of a hop: what it sent that the relaying replica has not confirmed passing on */
  hopOutbox?: HopOutbox;
  /** the client's frames, a budget per turn of the event loop (set at open) */
  inflow?: Inflow;
  closed: boolean;
}

export type Ws = uWS.WebSocket<SocketData>;
