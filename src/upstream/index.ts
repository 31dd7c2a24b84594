// The gateway's socket to the upstream speech service (or the emulator), one per session.
// A thin wrapper over `ws` so the session code sees open/message/close callbacks and nothing else.
import WebSocket from 'ws';
import type { Endpoint } from '../protocol/index.js';

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
}

export interface UpstreamConnection {
  send(data: Buffer | string): void;
  sendJson(message: object): void;
  close(code?: number, reason?: string): void;
  readonly isOpen: boolean;
}

export function upstreamUrl(t: UpstreamTarget): string {
  const base = t.wsBase.replace(/\/+$/, '');
  const path = t.endpoint === 'transcribe' ? '/transcribe' : `/interactions/${encodeURIComponent(t.interactionId ?? '')}/streams`;
  const q = new URLSearchParams({ 'tenant-name': t.tenant, token: `Bearer ${t.token}` });
  if (t.environment) q.set('environment', t.environment);
  return `${base}${path}?${q.toString()}`;
}

export function connectUpstream(t: UpstreamTarget, h: UpstreamHandlers, o: { connectTimeoutMs: number }): UpstreamConnection {
  const ws = new WebSocket(upstreamUrl(t), { perMessageDeflate: false, handshakeTimeout: o.connectTimeoutMs, maxPayload: MAX_UPSTREAM_MESSAGE_BYTES });
  // Exactly one of onError / onClose reaches the session, once.
  let reported = false;
  const fail = (message: string) => {
    if (reported) return;
    reported = true;
    h.onError(new Error(message));
  };
  ws.on('open', () => h.onOpen());
  ws.on('message', (data, isBinary) => h.onMessage(data as Buffer, isBinary));
  ws.on('unexpected-response', (_req, res) => {
    // Say what the upstream answered, never the URL (it carries the token).
    fail(`upstream refused the connection with HTTP ${res.statusCode}`);
    ws.terminate();
  });
  ws.on('error', (err) => fail(`upstream connection failed: ${err.message.replace(/token=[^&\s]*/g, 'token=[redacted]')}`));
  ws.on('close', (code, reason) => {
    if (reported) return;
    reported = true;
    h.onClose(code, reason.toString());
  });
  return {
    send: (data) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(data, { binary: typeof data !== 'string' });
    },
    sendJson: (message) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
    },
    close: (code = 1000, reason = '') => {
      if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
      else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    },
    get isOpen() {
      return ws.readyState === WebSocket.OPEN;
    },
  };
}
