// Whether a replica whose heartbeat is still in Redis is really there: its address refusing TCP
// connections proves its process is gone (a killed replica whose heartbeat has not expired yet).
import net from 'node:net';

/** How long a replica whose heartbeat lasts gets to accept a TCP connection before it counts as alive anyway. */
const PROBE_MS = 300;

/** The owner's address refuses connections: its process is gone though its heartbeat has not expired
 * yet (a killed replica whose address is still up). Anything else (accepted, no answer) is not proof.
 * A busy event loop runs the probe's timer before the refusal it has already received (timers come
 * before I/O in a loop turn), so the timeout decides only after that turn's I/O (setImmediate): a
 * dead owner is not taken for alive because this replica was slow. */
export function addressRefuses(url: string, timeoutMs = PROBE_MS): Promise<boolean> {
  const { hostname, port, protocol } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({
      host: hostname.replace(/^\[|\]$/g, ''),
      port: Number(port) || (protocol === 'wss:' ? 443 : 80),
    });
    const done = (dead: boolean) => {
      socket.destroy();
      resolve(dead);
    };
    socket.setTimeout(timeoutMs, () => setImmediate(() => done(false)));
    socket.once('connect', () => done(false));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED'));
  });
}
