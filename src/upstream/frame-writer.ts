// Writes a client's WebSocket frames to a socket. They are masked with a zero key (the
// XOR is then a no-op: skipped, the header still says masked) and leave in one write each, header
// and payload together.
import type { Socket } from 'node:net';

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

/** Header of a masked frame (mask key 0) for a payload of `len` bytes, with `extra` bytes of room after it. */
function header(opcode: number, len: number, extra: number): Buffer {
  const b = Buffer.allocUnsafe(headerSize(len) + extra);
  writeHeader(b, opcode, len);
  return b;
}

/** Header and payload in one write: copied into the shared frame buffer when the socket has nothing
 * queued (the usual case), else as two parts of one corked writev, the payload not copied. */
export function sendFrame(socket: Socket, opcode: number, payload: Buffer): void {
  const size = headerSize(payload.length),
    total = size + payload.length;
  if (total <= OUT_BYTES && socket.writableLength === 0) {
    writeHeader(out, opcode, payload.length);
    payload.copy(out, size);
    socket.write(out.subarray(0, total));
    if (socket.writableLength > 0) out = Buffer.allocUnsafeSlow(OUT_BYTES); // that write still reads it
    return;
  }
  const head = header(opcode, payload.length, 0);
  if (payload.length === 0) return void socket.write(head);
  socket.cork(); // one writev: header and payload in one segment
  socket.write(head);
  socket.write(payload);
  socket.uncork();
}

/** Text (JSON, a close frame's code and reason) is small: encoded straight behind its header, one
 * buffer. A close code (`closeCode` >= 0) goes before the text. */
export function sendText(socket: Socket, opcode: number, text: string, closeCode = -1): void {
  const extra = closeCode >= 0 ? 2 : 0;
  const len = Buffer.byteLength(text) + extra;
  const frame = header(opcode, len, len);
  const at = frame.length - len;
  if (closeCode >= 0) frame.writeUInt16BE(closeCode, at);
  frame.write(text, at + extra);
  socket.write(frame);
}
