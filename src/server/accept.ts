// The one place a socket is accepted: the public gate (upgrade.ts) and the hop's (hop-route.ts) hand
// over the upgrade request as read and the socket's data, of its kind.
import type uWS from 'uWebSockets.js';
import type { SocketData } from './types.js';

/** The client's upgrade request as the gate read it (uWS's `req` is gone after an await). */
export interface ClientUpgrade {
  res: uWS.HttpResponse;
  context: uWS.us_socket_context_t;
  secKey: string;
  /** the Sec-WebSocket-Protocol to answer with */
  protocol: string;
  secExtensions: string;
  aborted(): boolean;
}

/** Accepts the WebSocket, not inside res.cork: with uWS 20.57 as with the build before it, cork()
 * around an upgrade after an await drops some new sockets (their clients see 1006 right after the
 * open, before CONFIG_ACCEPTED): measured in about ten suite files a run, both when every such
 * upgrade was corked and when only those after the handler's own loop turn were. Uncorked, uWS
 * prints a warning on stderr for an upgrade after a real await (worker thread, Redis) and the
 * socket works. */
export function accept(up: ClientUpgrade, data: SocketData): void {
  up.res.upgrade(data, up.secKey, up.protocol, up.secExtensions, up.context);
}
