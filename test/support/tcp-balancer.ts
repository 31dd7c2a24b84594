// Test support: a round-robin TCP balancer on loopback in front of several gateway processes, as a
// Kubernetes Service (or an ingress) is in front of replicas. A backend marked down gets no new
// connections (its pod left the endpoints); its open connections stay, as they do in Kubernetes.
// A backend that refuses the connection (a killed process) is skipped for the next one, as nginx's
// proxy_next_upstream does: a client's reconnect never lands on a dead port.
import net from 'node:net';

export interface TcpBalancer {
  /** The balancer's port on 127.0.0.1. */
  port: number;
  /** Connections each backend accepted, by backend index. */
  counts: number[];
  /** Stops sending new connections to backend i; up(i) sends them again. */
  down(i: number): void;
  up(i: number): void;
  close(): Promise<void>;
}

export async function startTcpBalancer(backendPorts: number[]): Promise<TcpBalancer> {
  const counts = backendPorts.map(() => 0);
  const isDown = backendPorts.map(() => false);
  const open = new Set<net.Socket>();
  let next = 0;

  /** Connects to the next backend that is up and accepts, trying each at most once; null if none does. */
  async function connectNext(): Promise<net.Socket | null> {
    for (let tried = 0; tried < backendPorts.length; tried++) {
      const i = next++ % backendPorts.length;
      if (isDown[i]) continue;
      const backend = await new Promise<net.Socket | null>((resolve) => {
        const s = net.connect(backendPorts[i], '127.0.0.1');
        s.once('connect', () => resolve(s));
        s.once('error', () => resolve(null));
      });
      if (backend) {
        counts[i]++;
        return backend;
      }
    }
    return null;
  }

  const server = net.createServer((client) => {
    open.add(client);
    client.pause(); // the request waits in the kernel until a backend is chosen
    client.on('error', () => client.destroy());
    client.on('close', () => open.delete(client));
    connectNext().then((backend) => {
      if (!backend) return client.resetAndDestroy();
      if (client.destroyed) return backend.destroy();
      open.add(backend);
      backend.on('close', () => open.delete(backend));
      // One side gone: the other goes too, as it would behind a real network path.
      for (const [a, b] of [
        [client, backend],
        [backend, client],
      ]) {
        a.on('error', () => b.destroy());
        a.on('close', () => b.end());
        a.pipe(b, { end: false });
      }
      client.resume();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    counts,
    down: (i) => (isDown[i] = true),
    up: (i) => (isDown[i] = false),
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
