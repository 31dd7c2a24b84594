// The upstream client's frame reader, driven with hand-built bytes: what a server may send, in every
// split a socket could deliver it, and each breach of the protocol it refuses, with the close code.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { FrameReader, MAX_FRAGMENTS } from '../../src/upstream/frame-reader.js';

/** What the sink heard, in order, as short strings: `text:…`, `binary:<hex>`, `ping:…`, `close:code:reason`, `error:code:message`. */
function reader(maxMessageBytes = 1024, readBuffer?: Buffer) {
  const heard: string[] = [];
  const kept: Buffer[] = [];
  const r = new FrameReader(
    {
      message: (data, binary) => {
        kept.push(data);
        heard.push(binary ? `binary:${data.toString('hex')}` : `text:${data.toString()}`);
      },
      ping: (payload) => {
        kept.push(payload);
        heard.push(`ping:${payload.toString()}`);
      },
      close: (code, reason) => heard.push(`close:${code}:${reason}`),
      error: (code, message) => heard.push(`error:${code}:${message}`),
    },
    { maxMessageBytes, readBuffer },
  );
  return { r, heard, kept };
}

/** A server's frame (unmasked): FIN and opcode in the first byte, the length in 7, 16 or 64 bits. */
function frame(
  opcode: number,
  payload: Buffer | string,
  { fin = true, first }: { fin?: boolean; first?: number } = {},
) {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const b0 = first ?? (fin ? 0x80 : 0) | opcode;
  if (p.length < 126) return Buffer.concat([Buffer.from([b0, p.length]), p]);
  if (p.length < 65536) return Buffer.concat([Buffer.from([b0, 126, p.length >> 8, p.length & 0xff]), p]);
  const len = Buffer.alloc(8);
  len.writeUInt32BE(Math.floor(p.length / 2 ** 32), 0);
  len.writeUInt32BE(p.length >>> 0, 4);
  return Buffer.concat([Buffer.from([b0, 127]), len, p]);
}

const closeFrame = (code: number, reason = '') => {
  const p = Buffer.alloc(2 + Buffer.byteLength(reason));
  p.writeUInt16BE(code, 0);
  p.write(reason, 2);
  return frame(8, p);
};

const TEXT = 1,
  BINARY = 2,
  CONT = 0,
  PING = 9,
  PONG = 10;

describe('FrameReader', () => {
  // Short, 16-bit and 64-bit lengths; fragments with a ping between them; a pong; an empty message.
  const stream = Buffer.concat([
    frame(TEXT, 'hello'),
    frame(BINARY, Buffer.alloc(300, 0xab)),
    frame(TEXT, '{"type":"tran', { fin: false }),
    frame(PING, 'are you there'),
    frame(CONT, 'script"}'),
    frame(PONG, ''),
    frame(BINARY, Buffer.alloc(0)),
  ]);
  const whole = [
    'text:hello',
    `binary:${'ab'.repeat(300)}`,
    'ping:are you there',
    'text:{"type":"transcript"}',
    'binary:',
  ];

  it('reads frames all in one buffer', () => {
    const { r, heard } = reader();
    r.push(stream);
    assert.deepEqual(heard, whole);
  });

  it('reads them the same however the bytes are split in two', () => {
    for (let at = 0; at <= stream.length; at++) {
      const { r, heard } = reader();
      r.push(stream.subarray(0, at));
      r.push(stream.subarray(at));
      assert.deepEqual(heard, whole, `split at ${at}`);
    }
  });

  it('reads them the same however the bytes are split in three', () => {
    for (let a = 0; a <= stream.length; a += 3)
      for (let b = a; b <= stream.length; b += 5) {
        const { r, heard } = reader();
        r.push(stream.subarray(0, a));
        r.push(stream.subarray(a, b));
        r.push(stream.subarray(b));
        assert.deepEqual(heard, whole, `split at ${a} and ${b}`);
      }
  });

  it('reads them byte by byte', () => {
    const { r, heard } = reader();
    for (let i = 0; i < stream.length; i++) r.push(stream.subarray(i, i + 1));
    assert.deepEqual(heard, whole);
  });

  it('a 64-bit length, split inside its length bytes', () => {
    const big = frame(BINARY, Buffer.alloc(70_000, 7));
    assert.equal(big[1], 127);
    for (const at of [1, 2, 5, 9, 10, 11, 40_000]) {
      const { r, heard } = reader(100_000);
      r.push(big.subarray(0, at));
      r.push(big.subarray(at));
      assert.deepEqual(heard, [`binary:${'07'.repeat(70_000)}`], `split at ${at}`);
    }
  });

  it("copies what it keeps or hands on out of the caller's read buffer, which the next read overwrites", () => {
    const readBuffer = Buffer.alloc(64);
    const { r, heard, kept } = reader(1024, readBuffer);
    const read = (bytes: Buffer) => {
      bytes.copy(readBuffer);
      r.push(readBuffer.subarray(0, bytes.length));
      readBuffer.fill(0xff); // the next read lands here
    };
    const bytes = Buffer.concat([frame(TEXT, 'one'), frame(PING, 'p'), frame(TEXT, 'tw', { fin: false })]);
    read(bytes.subarray(0, 9)); // 'one', the ping, and part of the fragment's header
    read(bytes.subarray(9));
    read(frame(CONT, 'o'));
    read(frame(TEXT, 'three').subarray(0, 4));
    read(frame(TEXT, 'three').subarray(4));
    assert.deepEqual(heard, ['text:one', 'ping:p', 'text:two', 'text:three']);
    assert.deepEqual(
      kept.map((b) => b.toString()),
      ['one', 'p', 'two', 'three'],
    );
  });

  it('a close frame: its code and reason, or 1005 when it has none; nothing after it is read', () => {
    const a = reader();
    a.r.push(Buffer.concat([frame(TEXT, 'last'), closeFrame(4001, 'going'), frame(TEXT, 'after')]));
    a.r.push(frame(TEXT, 'later'));
    assert.deepEqual(a.heard, ['text:last', 'close:4001:going']);
    const b = reader();
    b.r.push(frame(8, ''));
    assert.deepEqual(b.heard, ['close:1005:']);
    const c = reader();
    c.r.push(closeFrame(1000, 'grüße'));
    assert.deepEqual(c.heard, ['close:1000:grüße']);
  });

  const breaches: Array<[string, Buffer, string]> = [
    [
      'a masked frame from a server',
      Buffer.from([0x81, 0x81, 0, 0, 0, 0, 0x41]),
      '1002:Invalid WebSocket frame: a masked frame',
    ],
    [
      'RSV1 set (compression nobody agreed to)',
      Buffer.from([0xc1, 0x01, 0x41]),
      '1002:Invalid WebSocket frame: RSV bits set',
    ],
    ['RSV3 set', Buffer.from([0x91, 0x01, 0x41]), '1002:Invalid WebSocket frame: RSV bits set'],
    ['a data opcode nobody defined', Buffer.from([0x83, 0x00]), '1002:Invalid WebSocket frame: opcode 3'],
    ['a control opcode nobody defined', Buffer.from([0x8b, 0x00]), '1002:Invalid WebSocket frame: opcode 11'],
    ['a fragmented ping', Buffer.from([0x09, 0x00]), '1002:Invalid WebSocket frame: a fragmented control frame'],
    [
      'a control frame over 125 bytes',
      frame(PING, Buffer.alloc(126)),
      '1002:Invalid WebSocket frame: a control frame over 125 bytes',
    ],
    ['a continuation of nothing', frame(CONT, 'x'), '1002:Invalid WebSocket frame: a continuation of nothing'],
    [
      'a new message inside a fragmented one',
      Buffer.concat([frame(TEXT, 'a', { fin: false }), frame(TEXT, 'b')]),
      '1002:Invalid WebSocket frame: a new message inside a fragmented one',
    ],
    [
      'invalid UTF-8 in a text message',
      frame(TEXT, Buffer.from([0xc3, 0x28])),
      '1007:Invalid WebSocket frame: invalid UTF-8 sequence',
    ],
    [
      'invalid UTF-8 across fragments',
      Buffer.concat([frame(TEXT, Buffer.from([0xe2, 0x82]), { fin: false }), frame(CONT, Buffer.from([0x28]))]),
      '1007:Invalid WebSocket frame: invalid UTF-8 sequence',
    ],
    ['a close frame of 1 byte', frame(8, Buffer.from([3])), '1002:Invalid WebSocket frame: a close frame of 1 byte'],
    ['close code 1005 on the wire', closeFrame(1005), '1002:Invalid WebSocket frame: close code 1005'],
    ['close code 999', closeFrame(999), '1002:Invalid WebSocket frame: close code 999'],
    ['close code 2000', closeFrame(2000), '1002:Invalid WebSocket frame: close code 2000'],
    ['close code 5000', closeFrame(5000), '1002:Invalid WebSocket frame: close code 5000'],
    [
      'a close reason that is not UTF-8',
      frame(8, Buffer.from([0x03, 0xe8, 0xff])),
      '1007:Invalid WebSocket frame: invalid UTF-8 sequence',
    ],
  ];
  for (const [what, bytes, error] of breaches) {
    it(`${what}: an error with its close code, and nothing more is read`, () => {
      const { r, heard } = reader();
      r.push(Buffer.concat([frame(TEXT, 'ok'), bytes, frame(TEXT, 'after')]));
      r.push(frame(TEXT, 'later'));
      assert.deepEqual(heard, ['text:ok', `error:${error}`]);
    });
  }

  it('binary messages need not be UTF-8, and a close code of 1000, 1014 or 3000-4999 is taken', () => {
    const { r, heard } = reader();
    r.push(frame(BINARY, Buffer.from([0xc3, 0x28])));
    assert.deepEqual(heard, ['binary:c328']);
    for (const code of [1000, 1003, 1007, 1014, 3000, 4999]) {
      const c = reader();
      c.r.push(closeFrame(code));
      assert.deepEqual(c.heard, [`close:${code}:`]);
    }
  });

  it('a message of exactly the bound is read, in one frame or in fragments; a byte more is refused with 1009', () => {
    const { r, heard } = reader(100);
    r.push(frame(BINARY, Buffer.alloc(100, 1)));
    r.push(Buffer.concat([frame(BINARY, Buffer.alloc(60, 2), { fin: false }), frame(CONT, Buffer.alloc(40, 3))]));
    assert.deepEqual(heard, [`binary:${'01'.repeat(100)}`, `binary:${'02'.repeat(60)}${'03'.repeat(40)}`]);
    const one = reader(100);
    one.r.push(frame(TEXT, 'x'.repeat(101)));
    assert.deepEqual(one.heard, ['error:1009:Max payload size exceeded']);
    const pieces = reader(100);
    pieces.r.push(frame(TEXT, 'x'.repeat(60), { fin: false }));
    pieces.r.push(frame(CONT, 'x'.repeat(41)));
    assert.deepEqual(pieces.heard, ['error:1009:Max payload size exceeded']);
  });

  it('a frame over the bound is refused on its header, its payload never waited for', () => {
    const { r, heard } = reader(1000);
    r.push(frame(BINARY, Buffer.alloc(70_000)).subarray(0, 10)); // the header only
    assert.deepEqual(heard, ['error:1009:Max payload size exceeded']);
    const huge = reader(1000);
    huge.r.push(Buffer.from([0x82, 127, 0, 0, 0, 1, 0, 0, 0, 0])); // 4 GiB
    assert.deepEqual(huge.heard, ['error:1009:Max payload size exceeded']);
  });

  it('control frames do not count against the bound', () => {
    const { r, heard } = reader(10);
    r.push(frame(PING, 'x'.repeat(125)));
    assert.deepEqual(heard, [`ping:${'x'.repeat(125)}`]);
  });

  it(`empty fragments cost nothing; a message in more than ${MAX_FRAGMENTS} pieces is refused with 1009`, () => {
    const { r, heard } = reader();
    const empties = Array.from({ length: 10_000 }, () => frame(CONT, '', { fin: false }));
    r.push(Buffer.concat([frame(TEXT, 'a', { fin: false }), ...empties, frame(CONT, 'b')]));
    assert.deepEqual(heard, ['text:ab']);
    const exact = reader(10_000);
    const pieces = (n: number) =>
      Buffer.concat([
        frame(TEXT, 'x', { fin: false }),
        ...Array.from({ length: n - 2 }, () => frame(CONT, 'x', { fin: false })),
        frame(CONT, 'y'),
      ]);
    exact.r.push(pieces(MAX_FRAGMENTS));
    assert.deepEqual(exact.heard, [`text:${'x'.repeat(MAX_FRAGMENTS - 1)}y`]);
    const over = reader(10_000);
    over.r.push(pieces(MAX_FRAGMENTS + 1));
    assert.deepEqual(over.heard, [`error:1009:a message in over ${MAX_FRAGMENTS} fragments`]);
  });
});
