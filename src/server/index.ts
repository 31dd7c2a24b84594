// The uWebSockets.js app, wired from its parts: the upgrade gate (upgrade.ts), socket behaviour
// (sockets.ts), HTTP routes (routes.ts) and the drain (drain.ts). This file listens and is the one
// way in.
import uWS from 'uWebSockets.js';
import { startJanitor } from '../cluster/index.js';
import type { Session } from '../session/index.js';
import { drainOnce } from './drain.js';
import { addHopRoutes } from './hop-route.js';
import { addRoutes } from './routes.js';
import { socketBehavior } from './sockets.js';
import type { ServerDeps, ServerState } from './types.js';
import { UnconfiguredSockets } from './unconfigured.js';

export type { Environments, ServedEnvironment, ServerDeps } from './types.js';

export interface GatewayServer {
  readonly port: number;
  readonly sessions: ReadonlySet<Session>;
  /** Runs once however often called: see drain.ts. Stops listening when no session is left. */
  drain(seconds: number): Promise<void>;
  close(): void;
}

/** The pinned build throws when its binary does not load; other builds serve from slow JavaScript instead. */
export function isNativeUws(): boolean {
  return /\[native code\]/.test(Function.prototype.toString.call(uWS.App));
}

export function startServer(deps: ServerDeps): Promise<GatewayServer> {
  const state: ServerState = {
    sessions: new Set(),
    draining: false,
    resumable: new Map(),
    claiming: new Set(),
    unconfigured: new UnconfiguredSockets(deps.maxUnconfiguredPerSubject),
  };
  const app = uWS
    .App()
    .ws('/audio-bridge/v2/transcribe', socketBehavior(deps, state, 'transcribe'))
    .ws('/audio-bridge/v2/interactions/:id/streams', socketBehavior(deps, state, 'streams'));
  addHopRoutes(app, deps, state);
  addRoutes(app, deps, state);
  const drain = drainOnce(deps, state);
  // Handed-over sessions nobody resumed: any replica ends them (one does, the records say which).
  const stopJanitor = deps.cluster.records.shared
    ? startJanitor({ ...deps.cluster, logger: deps.logger, ledger: deps.ledger, limiter: deps.limiter })
    : undefined;

  return new Promise((resolve, reject) => {
    app.listen(deps.host, deps.port, (socket) => {
      if (!socket) return reject(new Error(`could not listen on ${deps.host}:${deps.port}`));
      let listening: uWS.us_listen_socket | null = socket;
      const close = () => {
        stopJanitor?.();
        if (listening) uWS.us_listen_socket_close(listening);
        listening = null;
      };
      resolve({
        port: uWS.us_socket_local_port(socket),
        sessions: state.sessions,
        drain: (seconds) => drain(seconds).then(close),
        close,
      });
    });
  });
}
