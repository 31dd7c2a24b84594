// The client's side of the WebSocket opening handshake: the upgrade request, and the reading of the
// server's answer (its status line and the headers a client without extensions or subprotocols
// must check), however the answer is split across reads.
import { createHash, randomBytes } from 'node:crypto';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** The upgrade answer's status line and headers: a few hundred bytes from any real server. */
const MAX_HEAD_BYTES = 16 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');

/** The answer so far: not whole yet, refused (`error`: the failure's words), or accepted with the
 *  bytes that followed it (`rest`, maybe empty: the first frames). */
export type HandshakeAnswer = { more: true } | { error: string } | { rest: Buffer };

export class Handshake {
  readonly #key = randomBytes(16).toString('base64');
  /** the answer's bytes while they hold no blank line yet */
  #head?: Buffer;

  request(u: URL): string {
    return (
      `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: ${this.#key}\r\nSec-WebSocket-Version: 13\r\n\r\n`
    );
  }

  read(chunk: Buffer): HandshakeAnswer {
    if (this.#head) chunk = Buffer.concat([this.#head, chunk]);
    this.#head = undefined;
    const end = chunk.indexOf(HEAD_END);
    if (end < 0) {
      if (chunk.length > MAX_HEAD_BYTES) return { error: 'upstream connection failed: the upgrade answer is too long' };
      this.#head = Buffer.from(chunk); // a copy: the caller's buffer may be read into again
      return { more: true };
    }
    const wrong = this.#check(chunk.toString('latin1', 0, end));
    return wrong ? { error: wrong } : { rest: chunk.subarray(end + HEAD_END.length) };
  }

  /** What is wrong with the answer's status line and headers, if anything. */
  #check(head: string): string | undefined {
    const [status, ...lines] = head.split('\r\n');
    const code = /^HTTP\/1\.[01] (\d{3})/.exec(status)?.[1];
    // Say what the upstream answered, never the URL (it carries the token).
    if (code !== '101')
      return code
        ? `upstream refused the connection with HTTP ${code}`
        : 'upstream connection failed: not an HTTP answer';
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
    return wrong && `upstream connection failed: ${wrong}`;
  }
}
