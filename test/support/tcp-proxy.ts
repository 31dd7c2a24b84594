// Test support: a loopback TCP proxy in front of the gateway, so a test can drop the network under
// a client (cutAll: every proxied connection reset at once, no close frame, as a Wi-Fi drop does)
// while client and gateway keep running. It keeps the first bytes each client sent (bounded) so a
// test can read the upgrade request and the WebSocket frames the client sent, in order, and can hold
// what the gateway sends back for a while (a slow path between two replicas), in order.
import net from 'node:net';

/** What one client sent through the proxy: its HTTP upgrade head and the first frames after it. */
export interface ProxiedConnection {
  /** The request line and headers, e.g. "GET /path?q HTTP/1.1\r\nSec-WebSocket-Protocol: ...". */
  head: string;
  /** Client-to-gateway bytes after the head, the first CAPTURE_BYTES only. */
  sent: Buffer;
}

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Every connection made through the proxy, in order of arrival. */
  connections: ProxiedConnection[];
  /** Resets every proxied connection on both sides (TCP RST); new connections are still proxied. */
  cutAll(): void;
  /** From now on, gateway-to-client bytes arrive this much later (0: at once). */
  delayReplies(ms: number): void;
  close(): Promise<void>;
}

const CAPTURE_BYTES = 512 * 1024;
const HEAD_LIMIT = 16 * 1024;

/** `targetPort` may be read at each connection (a gateway started after its proxy). */
export async function startTcpProxy(targetPort: number | (() => number)): Promise<TcpProxy> {
  let replyDelayMs = 0;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const connections: ProxiedConnection[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(typeof targetPort === 'number' ? targetPort : targetPort(), '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const record: ProxiedConnection = { head: '', sent: Buffer.alloc(0) };
    connections.push(record);
    let pending: Buffer | null = Buffer.alloc(0); // until the head is complete
    client.on('data', (d: Buffer) => {
      if (pending) {
        pending = Buffer.concat([pending, d]);
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0 && pending.length < HEAD_LIMIT) return;
        record.head = pending.subarray(0, Math.max(end, 0)).toString('latin1');
        d = end < 0 ? Buffer.alloc(0) : pending.subarray(end + 4);
        pending = null;
      }
      if (record.sent.length < CAPTURE_BYTES)
        record.sent = Buffer.concat([record.sent, d.subarray(0, CAPTURE_BYTES - record.sent.length)]);
    });
    client.pipe(upstream);
    upstream.on('data', (d: Buffer) => {
      if (replyDelayMs === 0) return void client.write(d);
      setTimeout(() => client.writable && client.write(d), replyDelayMs); // timers of one duration fire in order
    });
    upstream.on('end', () => setTimeout(() => client.end(), replyDelayMs));
    // One side gone: the other goes too, as it would behind a real network path.
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) s.on('error', drop);
    client.on('close', drop);
    upstream.on('close', () => setTimeout(drop, replyDelayMs)); // after what it sent before
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections,
    cutAll() {
      for (const [client, upstream] of [...pairs]) {
        client.resetAndDestroy();
        upstream.resetAndDestroy();
      }
      pairs.clear();
    },
    delayReplies(ms) {
      replyDelayMs = ms;
    },
    async close() {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One WebSocket frame a client sent: opcode (1 text, 2 binary, 8 close, ...) and unmasked payload. */
export interface ClientFrame {
  opcode: number;
  payload: Buffer;
}

/** Decodes the masked client-to-server frames in `sent` (opcode, 7-bit length or a 16- or 64-bit one after
 *  it, the 4-byte mask key, the masked payload); a cut-off last frame is left out. */
export function clientFrames(sent: Buffer): ClientFrame[] {
  const frames: ClientFrame[] = [];
  for (let off = 0; off + 2 <= sent.length;) {
    const opcode = sent[off] & 0x0f;
    const short = sent[off + 1] & 0x7f;
    const ext = short === 126 ? 2 : short === 127 ? 8 : 0;
    const at = off + 2 + ext + 4; // header, extended length, mask
    if (at > sent.length) break;
    const len = ext === 2 ? sent.readUInt16BE(off + 2) : ext === 8 ? Number(sent.readBigUInt64BE(off + 2)) : short;
    if (at + len > sent.length) break;
    const mask = sent.subarray(at - 4, at);
    const payload = Buffer.from(sent.subarray(at, at + len));
    for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
    frames.push({ opcode, payload });
    off = at + len;
  }
  return frames;
}
