// Test support: a WebSocket client whose frames the test writes by hand, for clients no library
// would be: floods of frames in one write, a client that never answers a ping.
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { endpointPath, type Stack } from './stack.js';

/** One client frame: FIN, opcode `op` (1 text, 2 binary), masked with a zero key (so the payload goes as is). */
export function clientFrame(op: number, payload: Buffer): Buffer {
  const n = payload.length;
  if (n >= 65536) throw new Error(`a ${n}-byte payload: clientFrame writes 16-bit lengths at most`);
  const head = n < 126 ? Buffer.from([0x80 | op, 0x80 | n]) : Buffer.from([0x80 | op, 0x80 | 126, n >> 8, n & 255]);
  return Buffer.concat([head, Buffer.alloc(4), payload]);
}

/** `n` client text frames of `text`, one after another in one buffer. */
export function textFrames(text: string, n: number): Buffer {
  const frame = clientFrame(1, Buffer.from(text));
  const out = Buffer.allocUnsafe(frame.length * n);
  for (let i = 0; i < n; i++) frame.copy(out, i * frame.length);
  return out;
}

/** A `ws` client on the gateway's /transcribe (a token of tenant base in the query, no compression),
 *  open. `write` puts bytes on its TCP socket as they are: frames from clientFrame(), past the library. */
export async function openRawSocket(stack: Stack): Promise<RawSocket> {
  return openRawSocketAt(transcribeUrl(stack.base, await stack.token('openid transcribe')));
}

/** The gateway's /transcribe on `base` (ws://host:port) with `token` of tenant base in the query. */
export function transcribeUrl(base: string, token: string): string {
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  return `${base}${endpointPath('transcribe')}?${q}`;
}

export interface RawSocket {
  ws: WebSocket;
  write(bytes: Buffer): void;
}

/** openRawSocket() on a full socket URL (for a client in a process of its own, given the URL). */
export async function openRawSocketAt(url: string): Promise<RawSocket> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  return { ws, write: (bytes) => void (ws as unknown as { _socket: Socket })._socket.write(bytes) };
}
