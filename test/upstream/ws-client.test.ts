// The upstream WebSocket client's framing over real loopback sockets: against a tiny `ws` server
// (a conforming peer) for what a server may legitimately send, and against a raw TCP server for
// what only a broken or hostile one would (bad frames, a wrong handshake, silence).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { connectUpstream, type UpstreamConnection, type UpstreamOptions } from '../../src/upstream/index.js';
import { delay, until } from '../support/wait.js';

const MAX = 4 * 1024 * 1024;
const TOKEN = 'secret-token-value';

/** What the session would see from one upstream connection. */
interface Seen {
  conn: UpstreamConnection;
  opened: Promise<void>;
  messages: Array<{ data: Buffer; isBinary: boolean }>;
  /** how it ended: exactly one of error / close */
  ended: Promise<{ error?: string; close?: { code: number; reason: string } }>;
  endings: number;
}

function connect(port: number, o: Partial<UpstreamOptions> = {}): Seen {
  let opened!: () => void;
  let ended!: (e: { error?: string; close?: { code: number; reason: string } }) => void;
  const seen = {
    messages: [],
    endings: 0,
    opened: new Promise<void>((r) => (opened = r)),
    ended: new Promise((r) => (ended = r)),
  } as unknown as Seen;
  seen.conn = connectUpstream(
    { wsBase: `ws://127.0.0.1:${port}`, endpoint: 'transcribe', tenant: 't', token: TOKEN },
    {
      onOpen: () => opened(),
      onMessage: (data, isBinary) => seen.messages.push({ data: Buffer.from(data), isBinary }),
      onClose: (code, reason) => {
        seen.endings++;
        ended({ close: { code, reason } });
      },
      onError: (err) => {
        seen.endings++;
        ended({ error: err.message });
      },
    },
    { connectTimeoutMs: 2000, ...o },
  );
  return seen;
}

describe('against a ws server', () => {
  let wss: WebSocketServer;
  let port: number;
  /** A connection from the client under test and the server's side of it, both open. */
  const open = async (o: Partial<UpstreamOptions> = {}) => {
    const next = new Promise<WebSocket>((r) => wss.once('connection', r));
    const c = connect(port, o);
    const server = await next;
    await c.opened;
    return { c, server };
  };

  beforeAll(async () => {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 2 * MAX });
    await new Promise((r) => wss.once('listening', r));
    port = (wss.address() as { port: number }).port;
  });
  afterAll(() => new Promise((r) => wss.close(r)));

  it('sends the path and query, and binary and text frames the server reads intact', async () => {
    const req = new Promise<string>((r) => wss.once('headers', (_h, request) => r(request.url!)));
    const { c, server } = await open();
    assert.equal(await req, `/transcribe?tenant-name=t&token=Bearer+${TOKEN}`);
    const got: Array<[Buffer, boolean]> = [];
    server.on('message', (data, isBinary) => got.push([data as Buffer, isBinary]));
    const audio = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    c.conn.send(audio); // over 65,535 bytes: the 64-bit length
    c.conn.send(audio.subarray(0, 300)); // the 16-bit length
    c.conn.sendJson({ type: 'flush', note: 'grüße' });
    c.conn.send(Buffer.alloc(0));
    await until(() => got.length >= 4, 'the four frames at the server');
    assert.deepEqual(
      got.map(([d, b]) => [d.length, b]),
      [
        [70_000, true],
        [300, true],
        [33, false],
        [0, true],
      ],
    );
    assert.ok(got[0][0].equals(audio));
    assert.deepEqual(JSON.parse(got[2][0].toString()), { type: 'flush', note: 'grüße' });
    c.conn.close(1000, 'session over');
    const closed = await new Promise<[number, string]>((r) =>
      server.once('close', (code, reason) => r([code, reason.toString()])),
    );
    assert.deepEqual(closed, [1000, 'session over']);
    assert.deepEqual(await c.ended, { close: { code: 1000, reason: 'session over' } });
    assert.equal(c.conn.isOpen, false);
  });

  it("a frame the kernel could not take at once is not overwritten by another connection's frames", async () => {
    // Frames are assembled in one buffer all connections share; a write still pending must keep its bytes.
    const a = await open();
    const b = await open();
    const gotA: Buffer[] = [];
    const gotB: Buffer[] = [];
    a.server.on('message', (d) => gotA.push(d as Buffer));
    b.server.on('message', (d) => gotB.push(d as Buffer));
    (a.server as unknown as { _socket: Socket })._socket.pause(); // A's server stops reading: A backs up
    const frames = Array.from({ length: 2000 }, (_, i) => Buffer.alloc(8000, i % 251));
    for (const f of frames) a.c.conn.send(f); // 16 MB: far more than the loopback buffers hold
    for (let i = 0; i < 20; i++) b.c.conn.send(Buffer.alloc(8000, 0xfe));
    (a.server as unknown as { _socket: Socket })._socket.resume();
    for (let i = 0; i < 200 && gotA.length < frames.length; i++) await delay(50);
    assert.equal(gotA.length, frames.length);
    assert.equal(
      gotA.findIndex((d, i) => !d.equals(frames[i])),
      -1,
      'every frame of A arrives as it was sent',
    );
    assert.ok(gotB.length === 20 && gotB.every((d) => d.equals(Buffer.alloc(8000, 0xfe))));
    a.c.conn.close();
    b.c.conn.close();
    await Promise.all([a.c.ended, b.c.ended]);
  });

  it('reassembles fragmented text and binary messages, with a ping between fragments', async () => {
    const { c, server } = await open();
    const pong = new Promise<Buffer>((r) => server.once('pong', r));
    server.send('{"type":"tran', { fin: false });
    server.ping('are you there');
    server.send('script","data":{}}', { fin: true });
    server.send(Buffer.from([1, 2]), { binary: true, fin: false });
    server.send(Buffer.from([3]), { binary: true, fin: false });
    server.send(Buffer.from([4, 5]), { binary: true, fin: true });
    server.send('whole');
    assert.equal((await pong).toString(), 'are you there');
    await until(() => c.messages.length >= 3, 'the three messages');
    assert.deepEqual(
      c.messages.map((m) => [m.data.toString('hex'), m.isBinary]),
      [
        [Buffer.from('{"type":"transcript","data":{}}').toString('hex'), false],
        ['0102030405', true],
        [Buffer.from('whole').toString('hex'), false],
      ],
    );
    c.conn.close();
    await c.ended;
  });

  it('takes a message of exactly 4 MiB, in one frame or in fragments; one byte more is closed with 1009', async () => {
    const { c, server } = await open();
    server.send(Buffer.alloc(MAX, 7));
    server.send(Buffer.alloc(MAX / 2, 1), { fin: false });
    server.send(Buffer.alloc(MAX / 2, 2), { fin: true });
    await until(() => c.messages.length >= 2, 'both 4 MiB messages');
    assert.deepEqual(
      c.messages.map((m) => m.data.length),
      [MAX, MAX],
    );
    assert.equal(c.messages[1].data[MAX - 1], 2);
    const closed = new Promise<number>((r) => server.once('close', r));
    server.send(Buffer.alloc(MAX / 2), { fin: false });
    server.send(Buffer.alloc(MAX / 2 + 1), { fin: true });
    assert.equal(await closed, 1009);
    assert.deepEqual(await c.ended, { error: 'upstream connection failed: Max payload size exceeded' });
    assert.equal(c.messages.length, 2);
    assert.equal(c.endings, 1);
  });

  it('empty fragments cost nothing; a message in more than 4,096 pieces is refused with 1009', async () => {
    const { c, server } = await open();
    server.send('a', { fin: false });
    for (let i = 0; i < 10_000; i++) server.send('', { fin: false });
    server.send('b', { fin: true });
    for (let i = 0; i < 4096; i++) server.send('x', { fin: false });
    const closed = new Promise<number>((r) => server.once('close', r));
    server.send('y', { fin: true });
    assert.equal(await closed, 1009);
    assert.deepEqual(await c.ended, { error: 'upstream connection failed: a message in over 4096 fragments' });
    assert.deepEqual(
      c.messages.map((m) => m.data.toString()),
      ['ab'],
    );
  });

  it("a server's close: its code and reason reach the session, and the server gets its close frame back", async () => {
    const { c, server } = await open();
    const echoed = new Promise<number>((r) => server.once('close', r));
    server.close(4001, 'going');
    assert.deepEqual(await c.ended, { close: { code: 4001, reason: 'going' } });
    assert.equal(await echoed, 4001);
    await delay(50);
    assert.equal(c.endings, 1);
  });

  // When it pings and gives up is liveness.test.ts's, on a fake clock; here: the ping is a real
  // WebSocket ping, and the server's pong (ws answers pings itself) keeps the connection open.
  it('pings a quiet server over the wire, and its pongs keep the connection open', async () => {
    const { c, server } = await open({ liveness: { pingMs: 150, pongTimeoutMs: 200 } });
    let pings = 0;
    server.on('ping', () => pings++);
    await until(() => pings >= 2, 'two pings');
    assert.ok(c.conn.isOpen);
    c.conn.close();
    await c.ended;
  });
});

/** A raw TCP server: `onSocket` gets each connection and the request's Sec-WebSocket-Key. */
async function rawServer(onSocket: (s: Socket, key: string) => void): Promise<{ port: number; server: Server }> {
  const server = createServer((s) => {
    let head = '';
    s.on('data', function onData(d) {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      s.off('data', onData);
      onSocket(s, /sec-websocket-key: (\S+)/i.exec(head)![1]);
    });
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, server };
}

const acceptOf = (key: string) =>
  createHash('sha1')
    .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
    .digest('base64');
const upgraded = (accept: string) =>
  `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`;

/** The close code in the first close frame (opcode 8, masked: the client's) in `bytes`, if any. */
function clientCloseCode(bytes: Buffer): number | undefined {
  if (bytes.length < 8 || (bytes[0] & 0x0f) !== 8) return undefined;
  const mask = bytes.subarray(2, 6);
  return ((bytes[6] ^ mask[0]) << 8) | (bytes[7] ^ mask[1]);
}

describe('against a broken server', () => {
  const servers: Server[] = [];
  afterAll(() => servers.forEach((s) => s.close()));
  async function serve(onSocket: (s: Socket, key: string) => void): Promise<number> {
    const { port, server } = await rawServer(onSocket);
    servers.push(server);
    return port;
  }

  const badFrames: Array<[string, Buffer, RegExp]> = [
    ['RSV1 set (compression nobody agreed to)', Buffer.from([0xc1, 0x01, 0x41]), /RSV/],
    ['an unknown opcode', Buffer.from([0x83, 0x00]), /opcode 3/],
    ['a masked frame from the server', Buffer.from([0x81, 0x81, 0, 0, 0, 0, 0x41]), /masked/],
    ['a continuation of nothing', Buffer.from([0x80, 0x01, 0x41]), /continuation/],
    ['a fragmented ping', Buffer.from([0x09, 0x00]), /fragmented control/],
    ['a close code 1005 on the wire', Buffer.from([0x88, 0x02, 0x03, 0xed]), /close code 1005/],
  ];
  for (const [what, frame, message] of badFrames) {
    it(`${what}: the session gets an error, the server a close 1002`, async () => {
      let received!: Promise<Buffer>;
      const port = await serve((s, key) => {
        const chunks: Buffer[] = [];
        s.on('data', (d) => chunks.push(d));
        received = new Promise((r) => s.on('close', () => r(Buffer.concat(chunks))));
        s.write(upgraded(acceptOf(key)));
        s.write(Buffer.concat([Buffer.from([0x81, 0x02]), Buffer.from('ok')])); // a good frame first, in the same read maybe
        s.write(frame);
      });
      const c = connect(port);
      const end = await c.ended;
      assert.match(end.error ?? '', message);
      assert.deepEqual(
        c.messages.map((m) => m.data.toString()),
        ['ok'],
      );
      assert.equal(clientCloseCode(await received), 1002);
      assert.equal(c.endings, 1);
    });
  }

  it('invalid UTF-8 in a text message: an error, close 1007, nothing delivered', async () => {
    let received!: Promise<Buffer>;
    const port = await serve((s, key) => {
      const chunks: Buffer[] = [];
      s.on('data', (d) => chunks.push(d));
      received = new Promise((r) => s.on('close', () => r(Buffer.concat(chunks))));
      s.write(upgraded(acceptOf(key)));
      s.write(Buffer.from([0x81, 0x02, 0xc3, 0x28]));
    });
    const c = connect(port);
    assert.match((await c.ended).error ?? '', /UTF-8/);
    assert.equal(c.messages.length, 0);
    assert.equal(clientCloseCode(await received), 1007);
  });

  it('a frame split across many reads, down to single bytes, arrives whole', async () => {
    const message = Buffer.from(`{"type":"transcript","text":"${'x'.repeat(300)}"}`);
    const port = await serve(async (s, key) => {
      const bytes = Buffer.concat([
        Buffer.from(upgraded(acceptOf(key))),
        Buffer.from([0x81, 126, message.length >> 8, message.length & 0xff]),
        message,
      ]);
      for (let i = 0; i < bytes.length; i += 1 + (i % 7)) {
        s.write(bytes.subarray(i, i + 1 + (i % 7)));
        await delay(1);
      }
    });
    const c = connect(port);
    await c.opened;
    for (let i = 0; i < 100 && c.messages.length === 0; i++) await delay(10);
    assert.deepEqual(
      c.messages.map((m) => m.data.toString()),
      [message.toString()],
    );
    c.conn.close();
  });

  it('101 with the wrong Sec-WebSocket-Accept: an error, never open', async () => {
    const port = await serve((s) => s.write(upgraded(acceptOf('not the key'))));
    const c = connect(port);
    let opened = false;
    void c.opened.then(() => (opened = true));
    assert.deepEqual(await c.ended, { error: 'upstream connection failed: Invalid Sec-WebSocket-Accept header' });
    assert.equal(opened, false);
  });

  it('a refusal: the HTTP status, never the URL or the token', async () => {
    const port = await serve((s) => s.end(`HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden`));
    const c = connect(port);
    const { error } = await c.ended;
    assert.equal(error, 'upstream refused the connection with HTTP 403');
  });

  it('no answer to the upgrade: the connect timeout', async () => {
    const port = await serve(() => {});
    const c = connect(port, { connectTimeoutMs: 300 });
    const since = Date.now();
    assert.deepEqual(await c.ended, { error: 'upstream connection failed: Opening handshake has timed out' });
    assert.ok(Date.now() - since < 1000);
  });

  it('silent after the upgrade (half-open): a ping, then dead after the pong timeout', async () => {
    const port = await serve((s, key) => s.write(upgraded(acceptOf(key))));
    const c = connect(port, { liveness: { pingMs: 100, pongTimeoutMs: 200 } });
    await c.opened;
    const since = Date.now();
    assert.deepEqual(await c.ended, { error: 'the speech service stopped answering (no pong in 0.2 s)' });
    const waited = Date.now() - since;
    assert.ok(waited >= 280 && waited < 800, `dead after ${waited} ms (ping 100 + timeout 200)`);
  });
});

/** One upstream connection in a child process started with `env`: it sends a hello, prints what it hears. */
function childConnection(base: string, env: Record<string, string>): Promise<string> {
  const script = `
    const { connectUpstream } = await import(process.env.MODULE);
    const c = connectUpstream({ wsBase: process.env.BASE, endpoint: 'transcribe', tenant: 't', token: 'x' }, {
      onOpen: () => c.sendJson({ type: 'hello' }),
      onMessage: (d) => { console.log('message ' + d); c.close(); },
      onClose: (code) => console.log('close ' + code),
      onError: (e) => console.log('error ' + e.message),
    }, { connectTimeoutMs: 5000 });`;
  const module = new URL('../../src/upstream/index.ts', import.meta.url).href;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, ...env, MODULE: module, BASE: base },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  return new Promise((r) => child.on('close', () => r(out.trim())));
}

describe('wss, as production upstreams are', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sgw-wss-'));
  const cert = join(dir, 'upstream.crt');
  const key = join(dir, 'upstream.key');
  const servernames: Array<string | false | null> = [];
  let https: HttpsServer;
  let port: number;

  beforeAll(async () => {
    const made = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost',
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    assert.equal(made.status, 0, 'openssl made the test certificate');
    https = createHttpsServer({ cert: readFileSync(cert), key: readFileSync(key) });
    https.on('secureConnection', (s: TLSSocket) => servernames.push(s.servername));
    new WebSocketServer({ server: https }).on('connection', (ws) => ws.on('message', (d) => ws.send(`echo ${d}`)));
    await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
    port = (https.address() as { port: number }).port;
  });
  afterAll(() => https.close());

  it('trusts a CA from NODE_EXTRA_CA_CERTS and names the host for SNI', async () => {
    const out = await childConnection(`wss://localhost:${port}`, { NODE_EXTRA_CA_CERTS: cert });
    assert.equal(out, 'message echo {"type":"hello"}\nclose 1000');
    assert.deepEqual(servernames, ['localhost']);
  });

  it('without that CA: a certificate error, never open', async () => {
    const out = await childConnection(`wss://localhost:${port}`, {});
    assert.match(out, /^error upstream connection failed: self[- ]signed certificate(;|$)/);
  });
});
