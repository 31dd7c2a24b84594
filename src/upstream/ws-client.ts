// The WebSocket client (RFC 6455) of one session's upstream connection, on net/tls. Hand-written
// rather than `ws` because it carries every session's audio and transcripts, and user CPU is where
// the gateway loses to nginx: 300 connections each sending a 3 KB frame and reading a 220-byte text
// answer cost 7-8 µs of user CPU per round trip with this client against 11-13 with `ws` (default or
// zero mask, no compression); system time is the same.
// It does only what the upstream needs: no extensions, subprotocols, redirects or proxies. Frames out
// are masked with a zero key (the XOR is then a no-op: skipped, the header still says masked) and
// leave in one write each, header and payload together.
import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

type TlsOptions = ConnectionOptions;
import { metrics } from '../telemetry/index.js';
import type { UpstreamConnection, UpstreamHandlers, UpstreamLiveness, UpstreamOptions } from './index.js';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** The upgrade answer's status line and headers: a few hundred bytes from any real server. */
const MAX_HEAD_BYTES = 16 * 1024;
/** How long a close handshake may take before the socket is dropped. */
const CLOSE_TIMEOUT_MS = 5000;
/** Pieces of one fragmented message, each kept until the last (4 MiB in 1 KiB pieces): real servers send a few. */
const MAX_FRAGMENTS = 4096;
const OP_CONT = 0,
  OP_TEXT = 1,
  OP_BINARY = 2,
  OP_CLOSE = 8,
  OP_PING = 9,
  OP_PONG = 10;
const CONNECTING = 0,
  OPEN = 1,
  CLOSING = 2,
  CLOSED = 3;
const HEAD_END = Buffer.from('\r\n\r\n');
/** Every upstream socket reads into this one buffer (net's `onread`), and the bytes are handled at
 * once: no Buffer per read and no Readable-stream machinery per chunk (that machinery was a fifth of
 * the gateway's busy main thread under load). What outlives the read is copied out of it. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
const own = (b: Buffer) => (b.buffer === READ_BUFFER.buffer ? Buffer.from(b) : b);

/** Binary frames up to this size are assembled here, header then payload, and leave in one write:
 * copying a few KB costs less than Node's corked writev (an entry per part, an array, a request per
 * frame). A write the kernel does not take at once still reads it: the next frame gets a new one. */
const OUT_BYTES = 16 * 1024;
let out = Buffer.allocUnsafeSlow(OUT_BYTES);

const headerSize = (len: number) => (len < 126 ? 6 : len < 65536 ? 8 : 14);

/** The header of a masked frame (mask key 0) at the start of `b`. */
function writeHeader(b: Buffer, opcode: number, len: number): void {
  const size = headerSize(len);
  b[0] = 0x80 | opcode;
  if (len < 126) b[1] = 0x80 | len;
  else if (len < 65536) {
    b[1] = 0x80 | 126;
    b.writeUInt16BE(len, 2);
  } else {
    b[1] = 0x80 | 127;
    b.writeUInt32BE(Math.floor(len / 2 ** 32), 2);
    b.writeUInt32BE(len >>> 0, 6);
  }
  b.writeUInt32BE(0, size - 4);
}

/** Close codes a peer may send (RFC 6455 7.4). */
const validCloseCode = (c: number) =>
  (c >= 1000 && c <= 1014 && c !== 1004 && c !== 1005 && c !== 1006) || (c >= 3000 && c <= 4999);

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
  readonly #key = randomBytes(16).toString('base64');
  readonly #maxMessage: number;
  /** Exactly one of onError / onClose reaches the handlers, once. */
  #reported = false;
  #closedByUs = false;
  #closeSent = false;
  #closeCode = 1006;
  #closeReason = '';
  #timer?: NodeJS.Timeout;
  /** Received bytes not yet a whole frame (or, while connecting, a whole head); #need: bytes wanted. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #need = 0;
  /** A fragmented message: its opcode and pieces so far. */
  #fragOp = 0;
  #frags: Buffer[] = [];
  #fragBytes = 0;
  /** Liveness: when anything last arrived, and when the unanswered ping left (0: none out). */
  #heardAt = 0;
  #pingAt = 0;

  constructor(
    url: string,
    private readonly h: UpstreamHandlers,
    private readonly o: UpstreamOptions & { maxMessageBytes: number },
  ) {
    this.#maxMessage = o.maxMessageBytes;
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
    // tls.connect takes `onread` too (Node's docs; @types/node leaves it out of its options type).
    this.#socket = secure
      ? tlsConnect({ host, port, servername: isIP(host) ? undefined : host, onread } as TlsOptions)
      : netConnect({ host, port, onread });
    this.#socket.setNoDelay(true);
    // Written now, sent once connected: no closure keeps the URL alive for the connection's life.
    this.#socket.write(
      `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: ${this.#key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
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
    if (typeof data === 'string') this.#sendText(OP_TEXT, data);
    else this.#sendFrame(OP_BINARY, data);
  }

  sendJson(message: object): void {
    if (this.#state === OPEN) this.#sendText(OP_TEXT, JSON.stringify(message));
  }

  close(code = 1000, reason = ''): void {
    this.#closedByUs = true;
    if (this.#state === OPEN) this.#startClose(code, reason);
    else if (this.#state === CONNECTING) {
      this.#state = CLOSED;
      this.#socket.destroy();
    }
  }

  // ── sending ────────────────────────────────────────────────────────────────
  /** Header of a masked frame (mask key 0) for a payload of `len` bytes, with `extra` bytes of room after it. */
  #header(opcode: number, len: number, extra: number): Buffer {
    const b = Buffer.allocUnsafe(headerSize(len) + extra);
    writeHeader(b, opcode, len);
    return b;
  }

  /** Header and payload in one write: copied into the shared frame buffer when the socket has nothing
   * queued (the usual case), else as two parts of one corked writev, the payload not copied. */
  #sendFrame(opcode: number, payload: Buffer): void {
    const size = headerSize(payload.length),
      total = size + payload.length;
    if (total <= OUT_BYTES && this.#socket.writableLength === 0) {
      writeHeader(out, opcode, payload.length);
      payload.copy(out, size);
      this.#socket.write(out.subarray(0, total));
      if (this.#socket.writableLength > 0) out = Buffer.allocUnsafeSlow(OUT_BYTES); // that write still reads it
      return;
    }
    const head = this.#header(opcode, payload.length, 0);
    if (payload.length === 0) return void this.#socket.write(head);
    this.#socket.cork(); // one writev: header and payload in one segment
    this.#socket.write(head);
    this.#socket.write(payload);
    this.#socket.uncork();
  }

  /** Text (JSON, a close frame's code and reason) is small: encoded straight behind its header, one buffer. */
  #sendText(opcode: number, text: string, closeCode = -1): void {
    const extra = closeCode >= 0 ? 2 : 0;
    const len = Buffer.byteLength(text) + extra;
    const frame = this.#header(opcode, len, len);
    const at = frame.length - len;
    if (closeCode >= 0) frame.writeUInt16BE(closeCode, at);
    frame.write(text, at + extra);
    this.#socket.write(frame);
  }

  #startClose(code: number, reason: string): void {
    this.#state = CLOSING;
    this.#stopWatch();
    if (!this.#closeSent) {
      this.#closeSent = true;
      this.#sendText(OP_CLOSE, reason.slice(0, 40), code);
    }
    this.#timer = setTimeout(() => this.#socket.destroy(), CLOSE_TIMEOUT_MS);
  }

  // ── receiving ──────────────────────────────────────────────────────────────
  #onData(chunk: Buffer): void {
    this.#heardAt = Date.now();
    if (this.#pendingBytes > 0) {
      this.#pending.push(own(chunk));
      this.#pendingBytes += chunk.length;
      if (this.#pendingBytes < this.#need) return;
      chunk = Buffer.concat(this.#pending, this.#pendingBytes);
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    let off = this.#state === CONNECTING ? this.#onHead(chunk) : 0;
    while (off < chunk.length && this.#state !== CLOSED) {
      const used = this.#frame(chunk, off);
      if (used === 0) break;
      off += used;
    }
    if (off < chunk.length && this.#state !== CLOSED) {
      this.#pending.push(own(off === 0 ? chunk : chunk.subarray(off)));
      this.#pendingBytes = chunk.length - off;
    }
  }

  /** The upgrade answer; returns where the frames start, or chunk.length to wait for more. */
  #onHead(chunk: Buffer): number {
    const end = chunk.indexOf(HEAD_END);
    if (end < 0) {
      if (chunk.length > MAX_HEAD_BYTES)
        this.#fail('error', 'upstream connection failed: the upgrade answer is too long');
      else {
        this.#pending = [own(chunk)];
        this.#pendingBytes = chunk.length;
        this.#need = chunk.length + 1;
      }
      return chunk.length;
    }
    const [status, ...lines] = chunk.toString('latin1', 0, end).split('\r\n');
    const code = /^HTTP\/1\.[01] (\d{3})/.exec(status)?.[1];
    // Say what the upstream answered, never the URL (it carries the token).
    if (code !== '101') {
      this.#fail(
        'error',
        code ? `upstream refused the connection with HTTP ${code}` : 'upstream connection failed: not an HTTP answer',
      );
      return chunk.length;
    }
    const headers = new Map(
      lines.map((l) => {
        const colon = l.indexOf(':');
        return [l.slice(0, colon).trim().toLowerCase(), l.slice(colon + 1).trim()];
      }),
    );
    const accept = createHash('sha1')
      .update(this.#key + ACCEPT_GUID)
      .digest('base64');
    const wrong =
      headers.get('upgrade')?.toLowerCase() !== 'websocket'
        ? 'Invalid Upgrade header'
        : headers.get('sec-websocket-accept') !== accept
          ? 'Invalid Sec-WebSocket-Accept header'
          : headers.has('sec-websocket-extensions')
            ? 'Server sent a Sec-WebSocket-Extensions header but no extension was requested'
            : headers.has('sec-websocket-protocol')
              ? 'Server sent a subprotocol but none was requested'
              : undefined;
    if (wrong) {
      this.#fail('error', `upstream connection failed: ${wrong}`);
      return chunk.length;
    }
    clearTimeout(this.#timer);
    this.#state = OPEN;
    this.#startWatch();
    this.h.onOpen();
    return end + HEAD_END.length;
  }

  /** One frame at `off`: its length, or 0 when it is not all here yet (or the connection failed). */
  #frame(b: Buffer, off: number): number {
    const avail = b.length - off;
    if (avail < 2) return this.#more(2);
    const b0 = b[off],
      b1 = b[off + 1];
    const opcode = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    let len = b1 & 0x7f;
    let head = 2;
    if (len === 126) {
      if (avail < 4) return this.#more(4);
      len = b.readUInt16BE(off + 2);
      head = 4;
    } else if (len === 127) {
      if (avail < 10) return this.#more(10);
      len = b.readUInt32BE(off + 2) * 2 ** 32 + b.readUInt32BE(off + 6);
      head = 10;
    }
    const bad =
      (b1 & 0x80) !== 0
        ? 'a masked frame'
        : (b0 & 0x70) !== 0
          ? 'RSV bits set'
          : opcode >= 8
            ? opcode > OP_PONG
              ? `opcode ${opcode}`
              : !fin
                ? 'a fragmented control frame'
                : len > 125
                  ? 'a control frame over 125 bytes'
                  : undefined
            : opcode > OP_BINARY
              ? `opcode ${opcode}`
              : opcode === OP_CONT
                ? this.#fragOp === 0
                  ? 'a continuation of nothing'
                  : undefined
                : this.#fragOp !== 0
                  ? 'a new message inside a fragmented one'
                  : undefined;
    if (bad) return this.#protocolError(1002, `Invalid WebSocket frame: ${bad}`);
    if (opcode < 8 && this.#fragBytes + len > this.#maxMessage)
      return this.#protocolError(1009, 'Max payload size exceeded');
    if (avail < head + len) return this.#more(head + len);
    const payload = b.subarray(off + head, off + head + len);
    if (opcode >= 8) this.#control(opcode, payload);
    else if (fin && opcode !== OP_CONT) this.#message(payload, opcode === OP_BINARY);
    else this.#fragment(opcode, payload, fin);
    return this.#state === CLOSED ? 0 : head + len;
  }

  /** The frame at the start of what is pending needs `bytes` in all; 0 stops the loop. */
  #more(bytes: number): number {
    this.#need = bytes;
    return 0;
  }

  #fragment(opcode: number, payload: Buffer, fin: boolean): void {
    if (opcode !== OP_CONT) this.#fragOp = opcode;
    if (this.#frags.length === MAX_FRAGMENTS)
      return void this.#protocolError(1009, `a message in over ${MAX_FRAGMENTS} fragments`);
    if (payload.length > 0) this.#frags.push(own(payload));
    this.#fragBytes += payload.length;
    if (!fin) return;
    const message = Buffer.concat(this.#frags, this.#fragBytes);
    const binary = this.#fragOp === OP_BINARY;
    this.#fragOp = 0;
    this.#frags = [];
    this.#fragBytes = 0;
    this.#message(message, binary);
  }

  #message(data: Buffer, binary: boolean): void {
    if (!binary && !isUtf8(data))
      return void this.#protocolError(1007, 'Invalid WebSocket frame: invalid UTF-8 sequence');
    if (this.#state === OPEN) this.h.onMessage(own(data), binary);
  }

  #control(opcode: number, payload: Buffer): void {
    if (opcode === OP_PING) {
      if (this.#state === OPEN) this.#sendFrame(OP_PONG, own(payload));
      return;
    }
    if (opcode !== OP_CLOSE) return; // a pong: #heardAt has it
    if (payload.length === 1) return void this.#protocolError(1002, 'Invalid WebSocket frame: a close frame of 1 byte');
    if (payload.length >= 2) {
      const code = payload.readUInt16BE(0);
      if (!validCloseCode(code)) return void this.#protocolError(1002, `Invalid WebSocket frame: close code ${code}`);
      const reason = payload.subarray(2);
      if (!isUtf8(reason)) return void this.#protocolError(1007, 'Invalid WebSocket frame: invalid UTF-8 sequence');
      this.#closeCode = code;
      this.#closeReason = reason.toString();
    } else this.#closeCode = 1005;
    if (this.#state !== CLOSING) this.#startClose(this.#closeCode === 1005 ? 1000 : this.#closeCode, '');
    this.#state = CLOSED; // nothing more is read: the upstream closes the TCP connection, or we do
    this.#socket.end();
  }

  /** The upstream broke the protocol: it is told with a close frame, the session with an error. */
  #protocolError(code: number, message: string): number {
    this.#fail('error', `upstream connection failed: ${message}`);
    if (this.#state === OPEN || this.#state === CLOSING) this.#startClose(code, '');
    this.#state = CLOSED;
    this.#socket.end();
    return 0;
  }

  // ── the end ────────────────────────────────────────────────────────────────
  #fail(cause: 'error' | 'dead', message: string): void {
    if (this.#state === CONNECTING) {
      this.#state = CLOSED;
      this.#socket.destroy();
    }
    this.#stopWatch();
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
    clearTimeout(this.#timer);
    this.#stopWatch();
    if (this.#reported) return;
    if (wasConnecting) return this.#fail('error', 'upstream connection failed: socket hang up');
    this.#reported = true;
    if (!this.#closedByUs) metrics.upstreamFailures.inc({ cause: 'closed' });
    this.h.onClose(this.#closeCode, this.#closeReason);
  }

  // ── liveness ───────────────────────────────────────────────────────────────
  // As uWS does for clients: a ping only after a quiet spell, and any byte at all proves life. One
  // timer, re-armed only when it fires: nothing is done per message but noting the time.
  #startWatch(): void {
    if (!this.o.liveness) return;
    this.#heardAt = Date.now();
    this.#timer = setTimeout(this.#check, this.o.liveness.pingMs);
  }

  #stopWatch(): void {
    clearTimeout(this.#timer);
  }

  readonly #check = (): void => {
    if (this.#state !== OPEN) return; // closing: the socket's close ends the watch
    const l = this.o.liveness as UpstreamLiveness;
    const now = Date.now();
    if (this.#pingAt > 0 && this.#heardAt < this.#pingAt) {
      this.#fail(
        'dead',
        `the speech service stopped answering (no pong in ${Math.round(l.pongTimeoutMs / 100) / 10} s)`,
      );
      this.#socket.destroy();
      return;
    }
    const quietFor = now - this.#heardAt;
    if (quietFor < l.pingMs) {
      this.#pingAt = 0;
      this.#timer = setTimeout(this.#check, l.pingMs - quietFor);
      return;
    }
    this.#pingAt = now;
    this.#sendFrame(OP_PING, Buffer.alloc(0));
    this.#timer = setTimeout(this.#check, l.pongTimeoutMs);
  };
}
