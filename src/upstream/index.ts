// The gateway's socket to the upstream speech service (or the emulator), one per session.
// A thin wrapper over `ws` so the session code sees open/message/close callbacks and nothing else.
import WebSocket from 'ws';
import type { Endpoint } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';

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
  const path = t.endpoint === 'transcribe' ? '/transcribe' : `/interactions/${encodeURIComponent(t.interactionId ?? '')}/streams`;
  const q = new URLSearchParams({ 'tenant-name': t.tenant, token: `Bearer ${t.token}` });
  if (t.environment) q.set('environment', t.environment);
  return `${base}${path}?${q.toString()}`;
}

export function connectUpstream(t: UpstreamTarget, h: UpstreamHandlers, o: UpstreamOptions): UpstreamConnection {
  const ws = new WebSocket(upstreamUrl(t), { perMessageDeflate: false, handshakeTimeout: o.connectTimeoutMs, maxPayload: MAX_UPSTREAM_MESSAGE_BYTES });
  // Exactly one of onError / onClose reaches the session, once.
  let reported = false;
  let closedByUs = false;
  let stopWatching: () => void = () => {};
  const fail = (cause: 'error' | 'dead', message: string) => {
    stopWatching();
    if (reported) return;
    reported = true;
    metrics.upstreamFailures.inc({ cause });
    h.onError(new Error(message));
  };
  ws.on('open', () => {
    if (o.liveness) stopWatching = watchLiveness(ws, o.liveness, (why) => {
      fail('dead', `the speech service stopped answering (${why})`);
      ws.terminate();
    });
    h.onOpen();
  });
  ws.on('message', (data, isBinary) => h.onMessage(data as Buffer, isBinary));
  ws.on('unexpected-response', (_req, res) => {
    // Say what the upstream answered, never the URL (it carries the token).
    fail('error', `upstream refused the connection with HTTP ${res.statusCode}`);
    ws.terminate();
  });
  ws.on('error', (err) => fail('error', `upstream connection failed: ${err.message.replace(/token=[^&\s]*/g, 'token=[redacted]')}`));
  ws.on('close', (code, reason) => {
    stopWatching();
    if (reported) return;
    reported = true;
    if (!closedByUs) metrics.upstreamFailures.inc({ cause: 'closed' });
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
      closedByUs = true;
      stopWatching();
      if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
      else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    },
    get isOpen() {
      return ws.readyState === WebSocket.OPEN;
    },
  };
}

/** Pings after a quiet spell; calls `dead` when the ping goes unanswered. Returns the stop function. */
function watchLiveness(ws: WebSocket, l: UpstreamLiveness, dead: (why: string) => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  const quiet = () => {
    if (ws.readyState !== WebSocket.OPEN) return; // closing: the close event ends the watch
    ws.ping();
    timer = setTimeout(() => dead(`no pong in ${Math.round(l.pongTimeoutMs / 100) / 10} s`), l.pongTimeoutMs);
  };
  const heard = () => {
    clearTimeout(timer);
    timer = setTimeout(quiet, l.pingMs);
  };
  heard();
  for (const event of ['message', 'ping', 'pong'] as const) ws.on(event, heard);
  return () => {
    clearTimeout(timer);
    for (const event of ['message', 'ping', 'pong'] as const) ws.off(event, heard);
  };
}
