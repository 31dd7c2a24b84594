// The uWebSockets.js apps, wired from their parts: the upgrade gate (upgrade.ts), socket behaviour
// (sockets.ts), HTTP routes (routes.ts), the internal hop (hop-route.ts) and the drain (drain.ts).
// Two listeners share one state: the client port (PORT: the sockets, health, the demo) and the admin
// port (ADMIN_PORT: metrics, the usage API, the hop). This file listens and is the one way in.
import uWS from 'uWebSockets.js';
import { startJanitor } from '../cluster/index.js';
import { measureReplayHeld } from '../telemetry/index.js';
import type { Session } from '../session/index.js';
import { drainOnce } from './drain.js';
import { addHopRoutes } from './hop-route.js';
import { addAdminRoutes, addClientRoutes } from './routes.js';
import { socketBehavior } from './sockets.js';
import type { ServerDeps, ServerState } from './types.js';
import { UnconfiguredSockets } from './unconfigured.js';

export type { Environments, ServedEnvironment, ServerDeps } from './types.js';

export interface GatewayServer {
  /** the client port: the sockets, /healthz, /readyz, the demo */
  readonly port: number;
  /** the admin port: /metrics, /v1/*, the internal hop */
  readonly adminPort: number;
  readonly sessions: ReadonlySet<Session>;
  /** Runs once however often called: see drain.ts. Closes the client port when no session is left;
   *  the admin port stays for close(), so scrapes see the drain's final counters. */
  drain(seconds: number): Promise<void>;
  /** Stops listening on both ports, the admin port last. */
  close(): void;
}

/** The pinned build throws when its binary does not load; other builds serve from slow JavaScript instead. */
export function isNativeUws(): boolean {
  return /\[native code\]/.test(Function.prototype.toString.call(uWS.App));
}

export async function startServer(deps: ServerDeps): Promise<GatewayServer> {
  const state: ServerState = {
    sessions: new Set(),
    draining: false,
    resumable: new Map(),
    claiming: new Set(),
    awaiting: new Set(),
    unconfigured: new UnconfiguredSockets({
      perToken: deps.maxUnconfiguredPerToken,
      perSubject: deps.maxUnconfiguredPerSubject,
    }),
  };
  measureReplayHeld(() => {
    let bytes = 0;
    for (const s of state.sessions) bytes += s.replayBytes;
    return bytes;
  });
  const client = uWS
    .App()
    .ws('/audio-bridge/v2/transcribe', socketBehavior(deps, state, 'transcribe'))
    .ws('/audio-bridge/v2/interactions/:id/streams', socketBehavior(deps, state, 'streams'));
  addClientRoutes(client, deps, state);
  // The hop's sockets live on the admin app, but their sessions are in the same state as the client's.
  const admin = uWS.App();
  addHopRoutes(admin, deps, state);
  addAdminRoutes(admin, deps);

  const clientSocket = await listen(client, deps.host, deps.port);
  const adminSocket = await listen(admin, deps.host, deps.adminPort).catch((err: Error) => {
    uWS.us_listen_socket_close(clientSocket);
    throw err;
  });
  const drain = drainOnce(deps, state);
  // Handed-over sessions nobody resumed: any replica ends them (one does, the records say which).
  const stopJanitor = deps.cluster.records.shared
    ? startJanitor({ ...deps.cluster, logger: deps.logger, ledger: deps.ledger, limiter: deps.limiter })
    : undefined;

  let clientOpen: uWS.us_listen_socket | null = clientSocket;
  let adminOpen: uWS.us_listen_socket | null = adminSocket;
  const closeClient = () => {
    stopJanitor?.();
    if (clientOpen) uWS.us_listen_socket_close(clientOpen);
    clientOpen = null;
  };
  const close = () => {
    closeClient();
    if (adminOpen) uWS.us_listen_socket_close(adminOpen);
    adminOpen = null;
  };
  return {
    port: uWS.us_socket_local_port(clientSocket),
    adminPort: uWS.us_socket_local_port(adminSocket),
    sessions: state.sessions,
    drain: (seconds) => drain(seconds).then(closeClient),
    close,
  };
}

function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) =>
    app.listen(host, port, (socket) =>
      socket ? resolve(socket) : reject(new Error(`could not listen on ${host}:${port}`)),
    ),
  );
}
