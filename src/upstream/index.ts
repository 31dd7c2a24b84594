// The gateway's socket to the upstream speech service (or the emulator), one per session: the
// session code sees open/message/close callbacks and nothing else (the client: ws-client.ts).
import type { Endpoint } from '../protocol/index.js';
import { UpstreamSocket } from './ws-client.js';

export { UpstreamError } from './ws-client.js';

/** The upstream sends transcripts, facts and status messages; anything larger is a fault (close 1009). */
const MAX_UPSTREAM_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface UpstreamTarget {
  /** WebSocket base, e.g. wss://api.eu.corti.app/audio-bridge/v2 */
  wsBase: string;
  endpoint: Endpoint;
  interactionId?: string;
  tenant: string;
  token: string;
  environment?: string;
}

export interface UpstreamHandlers {
  onOpen(): void;
  /** Text messages arrive as Buffers of UTF-8 so they can be relayed without decoding. */
  onMessage(data: Buffer, isBinary: boolean): void;
  onClose(code: number, reason: string): void;
  onError(err: Error): void;
  /** Runs `handle`, which delivers the messages of one read, so that what they cause is sent
   *  together (the client's socket corked: one write instead of one per message). */
  batch?(handle: () => void): void;
}

export interface UpstreamConnection {
  send(data: Buffer | string): void;
  sendJson(message: object): void;
  close(code?: number, reason?: string): void;
  readonly isOpen: boolean;
}

/** How a half-open upstream (no FIN, no RST: a crashed host, a dropped NAT entry) is found. As
 * uWS does for clients: a ping only after a quiet spell, and any frame at all proves life. */
export interface UpstreamLiveness {
  /** nothing received for this long: a WebSocket ping is sent */
  pingMs: number;
  /** still nothing received this long after the ping (pong or message): the upstream is dead */
  pongTimeoutMs: number;
}

export interface UpstreamOptions {
  connectTimeoutMs: number;
  /** absent: no pings and no idle timeout */
  liveness?: UpstreamLiveness;
}

export function upstreamUrl(t: UpstreamTarget): string {
  const base = t.wsBase.replace(/\/+$/, '');
  const path =
    t.endpoint === 'transcribe' ? '/transcribe' : `/interactions/${encodeURIComponent(t.interactionId ?? '')}/streams`;
  const q = new URLSearchParams({ 'tenant-name': t.tenant, token: `Bearer ${t.token}` });
  if (t.environment) q.set('environment', t.environment);
  return `${base}${path}?${q.toString()}`;
}

export function connectUpstream(t: UpstreamTarget, h: UpstreamHandlers, o: UpstreamOptions): UpstreamConnection {
  return new UpstreamSocket(upstreamUrl(t), h, { ...o, maxMessageBytes: MAX_UPSTREAM_MESSAGE_BYTES });
}
