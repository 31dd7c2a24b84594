// What the upstream client is given and gives back: where it connects, its callbacks, its options.
import type { Endpoint } from '../protocol/index.js';

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
