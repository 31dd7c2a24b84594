// The WebSocket client of one session's upstream connection, on net/tls. Hand-written
// rather than `ws` because it carries every session's audio and transcripts, and user CPU is where
// the gateway loses to nginx: 300 connections each sending a 3 KB frame and reading a 220-byte text
// answer cost 7-8 µs of user CPU per round trip with this client against 11-13 with `ws` (default or
// zero mask, no compression); system time is the same.
// It does only what the upstream needs: no extensions, subprotocols, redirects or proxies. Its parts:
// the opening handshake (handshake.ts), the frames read (frame-reader.ts) and written
// (frame-writer.ts), and the pings that find a dead peer (liveness.ts); this file is the connection's
// states and how it ends.
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect, createSecureContext, type ConnectionOptions, type SecureContext } from 'node:tls';

type TlsOptions = ConnectionOptions;
import { metrics } from '../telemetry/index.js';
import { FrameReader, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT } from './frame-reader.js';
import { sendFrame, sendText } from './frame-writer.js';
import { Handshake } from './handshake.js';
import type { UpstreamConnection, UpstreamHandlers, UpstreamOptions } from './types.js';
import { LivenessWatch } from './liveness.js';

/** How long a close handshake may take before the socket is dropped. */
const CLOSE_TIMEOUT_MS = 5000;
const CONNECTING = 0,
  OPEN = 1,
  CLOSING = 2,
  CLOSED = 3;
/** Every upstream socket reads into this one buffer (net's `onread`), and the bytes are handled at
 * once: no Buffer per read and no Readable-stream machinery per chunk (that machinery was a fifth of
 * the gateway's busy main thread under load). What outlives the read is copied out of it. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
/** One TLS context for every upstream connection: tls.connect makes a new one per connection
 * otherwise (an OpenSSL SSL_CTX and its set-up), for the same defaults (the CA store with
 * NODE_EXTRA_CA_CERTS, ciphers, protocol versions). Made at the first `wss` connection. */
let tlsContext: SecureContext | undefined;

/** An upstream socket's failure: `message` is its cause, for the log (it may name an internal address
 * or the network's error); `told` is what a client may read. */
export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly told: string,
  ) {
    super(message);
  }
}

export class UpstreamSocket implements UpstreamConnection {
  #state = CONNECTING;
  readonly #socket: Socket;
  readonly #handshake = new Handshake();
  readonly #reader: FrameReader;
  readonly #liveness?: LivenessWatch;
  /** Exactly one of onError / onClose reaches the handlers, once. */
  #reported = false;
  #closedByUs = false;
  #closeSent = false;
  #closeCode = 1006;
  #closeReason = '';
  /** the opening handshake's deadline, then the closing one's */
  #timer?: NodeJS.Timeout;

  constructor(
    url: string,
    private readonly h: UpstreamHandlers,
    o: UpstreamOptions & { maxMessageBytes: number },
  ) {
    this.#reader = new FrameReader(
      {
        message: (data, binary) => {
          if (this.#state === OPEN) this.h.onMessage(data, binary);
        },
        ping: (payload) => {
          if (this.#state === OPEN) sendFrame(this.#socket, OP_PONG, payload);
        },
        close: (code, reason) => this.#onClose(code, reason),
        error: (code, message) => this.#protocolError(code, message),
      },
      { maxMessageBytes: o.maxMessageBytes, readBuffer: READ_BUFFER },
    );
    if (o.liveness)
      this.#liveness = new LivenessWatch(o.liveness, {
        isOpen: () => this.#state === OPEN,
        ping: () => sendFrame(this.#socket, OP_PING, Buffer.alloc(0)),
        dead: (message) => {
          this.#fail('dead', message);
          this.#socket.destroy();
        },
      });
    const u = new URL(url);
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const secure = u.protocol === 'wss:';
    const port = Number(u.port) || (secure ? 443 : 80);
    const onread = {
      buffer: READ_BUFFER,
      callback: (n: number) => {
        this.#onData(READ_BUFFER.subarray(0, n));
        return true;
      },
    };
    // tls.connect takes `onread` as net.connect does; @types/node leaves it out of its options type.
    this.#socket = secure
      ? tlsConnect({
          host,
          port,
          servername: isIP(host) ? undefined : host,
          secureContext: (tlsContext ??= createSecureContext()),
          onread,
        } as TlsOptions)
      : netConnect({ host, port, onread });
    this.#socket.setNoDelay(true);
    // Written now, sent once connected: no closure keeps the URL alive for the connection's life.
    this.#socket.write(this.#handshake.request(u));
    this.#socket.on('error', (err) => {
      // After the upgrade a broken socket is a close without a close frame (1006), as with `ws`.
      if (this.#state === CONNECTING) this.#fail('error', `upstream connection failed: ${err.message}`);
    });
    this.#socket.on('close', () => this.#onSocketClose());
    this.#timer = setTimeout(
      () => this.#fail('error', 'upstream connection failed: Opening handshake has timed out'),
      o.connectTimeoutMs,
    );
  }

  get isOpen(): boolean {
    return this.#state === OPEN;
  }

  /** Strings go as text frames, Buffers as binary. A Buffer must not change after this call. */
  send(data: Buffer | string): void {
    if (this.#state !== OPEN) return;
    if (typeof data === 'string') sendText(this.#socket, OP_TEXT, data);
    else sendFrame(this.#socket, OP_BINARY, data);
  }

  sendJson(message: object): void {
    if (this.#state === OPEN) sendText(this.#socket, OP_TEXT, JSON.stringify(message));
  }

  close(code = 1000, reason = ''): void {
    this.#closedByUs = true;
    if (this.#state === OPEN) this.#startClose(code, reason);
    else if (this.#state === CONNECTING) {
      this.#state = CLOSED;
      this.#socket.destroy();
    }
  }

  #startClose(code: number, reason: string): void {
    this.#state = CLOSING;
    this.#stopTimers();
    if (!this.#closeSent) {
      this.#closeSent = true;
      sendText(this.#socket, OP_CLOSE, reason.slice(0, 40), code);
    }
    this.#timer = setTimeout(() => this.#socket.destroy(), CLOSE_TIMEOUT_MS);
  }

  // ── receiving ──────────────────────────────────────────────────────────────
  #onData(chunk: Buffer): void {
    this.#liveness?.heard();
    if (this.#state === CONNECTING) this.#onHead(chunk);
    else if (this.#state !== CLOSED) this.#reader.push(chunk);
  }

  /** The upgrade answer, then the frames that came with it. */
  #onHead(chunk: Buffer): void {
    const answer = this.#handshake.read(chunk);
    if ('more' in answer) return;
    if ('error' in answer) return this.#fail('error', answer.error);
    clearTimeout(this.#timer);
    this.#state = OPEN;
    this.#liveness?.start();
    this.h.onOpen();
    if (answer.rest.length > 0 && this.#state !== CLOSED) this.#reader.push(answer.rest);
  }

  /** The server's close frame: answered with one (unless ours went first), and nothing more is read. */
  #onClose(code: number, reason: string): void {
    this.#closeCode = code;
    this.#closeReason = reason;
    if (this.#state !== CLOSING) this.#startClose(code === 1005 ? 1000 : code, '');
    this.#state = CLOSED; // nothing more is read: the upstream closes the TCP connection, or we do
    this.#socket.end();
  }

  /** The upstream broke the protocol: it is told with a close frame, the session with an error. */
  #protocolError(code: number, message: string): void {
    this.#fail('error', `upstream connection failed: ${message}`);
    if (this.#state === OPEN || this.#state === CLOSING) this.#startClose(code, '');
    this.#state = CLOSED;
    this.#socket.end();
  }

  // ── the end ────────────────────────────────────────────────────────────────
  #fail(cause: 'error' | 'dead', message: string): void {
    if (this.#state === CONNECTING) {
      this.#state = CLOSED;
      this.#socket.destroy();
    }
    this.#stopTimers();
    if (this.#reported) return;
    this.#reported = true;
    metrics.upstreamFailures.inc({ cause });
    // A dead peer's message is the gateway's own words (no pong in N s); any other cause stays in the log.
    this.h.onError(
      new UpstreamError(message, cause === 'dead' ? message : 'the connection to the speech service failed'),
    );
  }

  #onSocketClose(): void {
    const wasConnecting = this.#state === CONNECTING;
    this.#state = CLOSED;
    this.#stopTimers();
    if (this.#reported) return;
    if (wasConnecting) return this.#fail('error', 'upstream connection failed: socket hang up');
    this.#reported = true;
    if (!this.#closedByUs) metrics.upstreamFailures.inc({ cause: 'closed' });
    this.h.onClose(this.#closeCode, this.#closeReason);
  }

  #stopTimers(): void {
    clearTimeout(this.#timer);
    this.#liveness?.stop();
  }
}
