// Dead peers: an upstream or a client that stops answering without closing (a crashed host, a
// dropped NAT entry: no FIN, no RST) is found by WebSocket pings and ends its session as any lost
// peer does, never left hanging. Real sockets: client → uWS gateway → upstream emulator, with short
// ping intervals so the test takes seconds. The half-open client is raw TCP: after the handshake it
// sends what it is told to and nothing else (no pong), and records every frame it gets.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { metrics } from '../../src/telemetry/index.js';
import { fixture } from '../support/fixtures.js';
import { clientFrame } from '../support/raw-client.js';
import { startStack, type Stack, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { endedLedgerSessions, type LedgerSession } from '../support/usage-api.js';
import { delay, until } from '../support/wait.js';

const ogg = fixture('dictation.ogg'); // ~26 s
const API = 'test-usage-token';

/** The ledger row of the session that closed last, once `count` sessions are all closed. */
async function closedRow(stack: Stack, count: number): Promise<LedgerSession & { segments: unknown[] }> {
  const rows = await endedLedgerSessions(stack, API, { count });
  if (rows.length < count || rows.some((r) => r.end === null))
    assert.fail(`no closed ledger row: ${JSON.stringify(rows)}`);
  return rows.sort((a, b) => a.end!.localeCompare(b.end!)).at(-1) as LedgerSession & { segments: unknown[] };
}

async function failures(cause: string): Promise<number> {
  return (await metrics.upstreamFailures.get()).values.find((v) => v.labels.cause === cause)?.value ?? 0;
}

/** A dictation under way: configured, the whole file sent, paced upstream, a transcript back. */
async function dictating(stack: Stack): Promise<TestClient> {
  const c = await stack.connect('transcribe');
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
  await c.next('CONFIG_ACCEPTED');
  for (let off = 0; off < ogg.length; off += 16_000) c.send(ogg.subarray(off, off + 16_000));
  await c.next('transcript', 10_000);
  return c;
}

/** How until() polls here: every 20 ms (the detection time below is measured with it), for 5 s at most. */
const POLL = { withinMs: 5000, everyMs: 20 };

/** Ends the dictation and checks what its user sees: every final once, on one timeline, no error, 1000. */
async function endsCleanly(c: TestClient): Promise<void> {
  c.sendJson({ type: 'end' });
  await c.next('ended', 40_000);
  assert.equal((await c.closed).code, 1000);
  assert.ok(!c.types().includes('error'), `no error: ${JSON.stringify(c.messages.filter((m) => m.type === 'error'))}`);
  const f = finals(c.messages);
  for (let i = 1; i < f.length; i++) assert.equal(f[i].start, f[i - 1].end, `final ${i} follows final ${i - 1}`);
  assert.ok(f.at(-1)!.end > 25, `the finals cover the whole dictation (last ends at ${f.at(-1)?.end})`);
}

const FAST_PINGS = {
  UPSTREAM_PING_SECONDS: '0.3',
  UPSTREAM_PONG_TIMEOUT_SECONDS: '0.5',
  PACE: '8',
  USAGE_API_TOKEN: API,
};

describe('an upstream that stops answering', () => {
  let stack: Stack;
  let sessions = 0;
  beforeAll(async () => {
    stack = await startStack(FAST_PINGS);
  });
  afterAll(() => stack.close());

  it('half-open mid-dictation: found within ping + timeout and replaced; the client notices nothing', async () => {
    const c = await dictating(stack);
    sessions++;
    const dead = await failures('dead');
    const upstreams = stack.emulator.sessions.length;
    stack.emulator.faults.halfOpen = true;
    const since = Date.now();
    try {
      await until(async () => (await failures('dead')) > dead, 'the dead upstream is found', POLL);
      const waited = Date.now() - since;
      assert.ok(waited < 800 + 700, `found in ${waited} ms (ping 0.3 s + timeout 0.5 s)`);
      await until(() => stack.emulator.sessions.length > upstreams, 'a new upstream session is opened', POLL);
    } finally {
      stack.emulator.faults.halfOpen = false; // the network heals: the new upstream session answers
    }
    await endsCleanly(c);
    const row = await closedRow(stack, sessions);
    assert.equal(row.outcome, 'ended');
    assert.ok(row.segments.length >= 2, `usage from each upstream session: ${JSON.stringify(row.segments)}`);
  });

  it('a stalled upstream still answers pings: a quiet spell longer than ping + timeout is not a death', async () => {
    const c = await dictating(stack);
    sessions++;
    const upstreams = stack.emulator.sessions.length;
    stack.emulator.faults.stall = true;
    await delay(1500);
    stack.emulator.faults.stall = false;
    await endsCleanly(c);
    assert.equal(stack.emulator.sessions.length, upstreams, 'the same upstream session throughout');
    const row = await closedRow(stack, sessions);
    assert.equal(row.outcome, 'ended');
    assert.equal(row.estimated, false);
  });

  for (const code of [1001, 1012]) {
    it(`going away with ${code} (an upstream restarting): counted as closed, replaced; the client notices nothing`, async () => {
      const c = await dictating(stack);
      sessions++;
      const closed = await failures('closed');
      const lost = stack.emulator.sessions.at(-1)!;
      stack.emulator.faults.goingAway = code;
      try {
        await until(() => lost.closed, 'the upstream session is closed', POLL);
        await delay(200); // still restarting: new sockets are closed with the code too
      } finally {
        stack.emulator.faults.goingAway = null;
      }
      assert.equal(lost.closeCode, code);
      await endsCleanly(c);
      assert.ok((await failures('closed')) > closed, 'counted as closed by the upstream');
      const row = await closedRow(stack, sessions);
      assert.equal(row.outcome, 'ended');
      assert.ok(row.segments.length >= 2, `usage from each upstream session: ${JSON.stringify(row.segments)}`);
    });
  }
});

describe('an upstream that stops answering, reconnection off', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ ...FAST_PINGS, UPSTREAM_RECONNECT_ATTEMPTS: '0' });
  });
  afterAll(() => stack.close());

  it('half-open: the client is told within ping + timeout, close 1014, the ledger closes it estimated', async () => {
    const c = await dictating(stack);
    stack.emulator.faults.halfOpen = true;
    const since = Date.now();
    try {
      const err = await c.next('error', 5000);
      const waited = Date.now() - since;
      assert.equal(err.error.id, 'UPSTREAM_UNAVAILABLE');
      assert.match(err.error.details, /stopped answering \(no pong in 0\.5 s\)/);
      assert.ok(waited < 800 + 700, `found in ${waited} ms (ping 0.3 s + timeout 0.5 s)`);
      assert.equal((await c.closed).code, 1014);
    } finally {
      stack.emulator.faults.halfOpen = false;
    }
    const row = await closedRow(stack, 1);
    assert.equal(row.outcome, 'upstream_lost');
    assert.equal(row.estimated, true, 'no final usage came: the provisional figure, marked estimated');
  });
});

/** A WebSocket client over raw TCP that answers nothing on its own: it never sends a pong. */
interface RawClient {
  /** opcode and arrival time of every frame received; text frames parsed */
  frames: Array<{ op: number; at: number; message?: Record<string, any> }>;
  send(op: 1 | 2, payload: Buffer): void;
  closedAt: Promise<number>;
}

/** Takes the server's (unmasked) frames off the front of `buf`; returns what is left. */
function readFrames(buf: Buffer, got: RawClient['frames']): Buffer {
  for (;;) {
    if (buf.length < 2) return buf;
    let n = buf[1] & 127;
    let off = 2;
    if (n === 126) [n, off] = [buf.length >= 4 ? buf.readUInt16BE(2) : Infinity, 4];
    else if (n === 127) [n, off] = [buf.length >= 10 ? Number(buf.readBigUInt64BE(2)) : Infinity, 10];
    if (buf.length < off + n) return buf;
    const op = buf[0] & 15;
    got.push({ op, at: Date.now(), message: op === 1 ? JSON.parse(buf.subarray(off, off + n).toString()) : undefined });
    buf = buf.subarray(off + n);
  }
}

async function rawClient(stack: Stack): Promise<RawClient> {
  const token = await stack.token('openid transcribe');
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const socket: Socket = connect(stack.gateway.server.port, '127.0.0.1');
  socket.write(
    `GET /audio-bridge/v2/transcribe?${q} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  const frames: RawClient['frames'] = [];
  let pending: Buffer = Buffer.alloc(0);
  let upgraded = false;
  const opened = new Promise<void>((resolve, reject) => {
    socket.on('data', (d) => {
      pending = Buffer.concat([pending, d]);
      if (!upgraded) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!pending.subarray(0, 12).toString().includes('101'))
          return reject(new Error(pending.toString().slice(0, 200)));
        upgraded = true;
        pending = pending.subarray(end + 4);
        resolve();
      }
      pending = readFrames(pending, frames);
    });
    socket.on('error', reject);
  });
  const closedAt = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
  await opened;
  return { frames, send: (op, payload) => socket.write(clientFrame(op, payload)), closedAt };
}

describe('a client that stops answering', () => {
  const IDLE = 8; // uWS's smallest idleTimeout: a ping after 4 s of silence, the close at 8 s
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ CLIENT_IDLE_SECONDS: String(IDLE), PACE: '8', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('half-open mid-dictation: pinged, closed within the idle timeout, its session ended upstream gracefully', async () => {
    const c = await rawClient(stack);
    const message = (type: string) => c.frames.find((f) => f.message?.type === type);
    c.send(
      1,
      Buffer.from(
        JSON.stringify({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } }),
      ),
    );
    await until(() => !!message('CONFIG_ACCEPTED'), 'CONFIG_ACCEPTED', POLL);
    for (let off = 0; off < 24_000; off += 8000) c.send(2, ogg.subarray(off, off + 8000)); // ~8 s of audio
    const silentSince = Date.now(); // from here on the client sends nothing, pongs included
    await until(() => !!message('transcript'), 'a transcript', POLL);

    const closedAt = await Promise.race([
      c.closedAt,
      delay((IDLE + 6) * 1000).then(() => assert.fail('the silent client is still open')),
    ]);
    const ping = c.frames.find((f) => f.op === 9);
    assert.ok(ping, `the gateway pinged the silent client (frames: ${JSON.stringify(c.frames.map((f) => f.op))})`);
    assert.ok(
      closedAt - silentSince < (IDLE + 4) * 1000,
      `closed ${closedAt - silentSince} ms after the client fell silent`,
    );
    assert.ok(closedAt > ping.at, 'closed after its ping went unanswered');

    const row = await closedRow(stack, 1);
    assert.equal(row.outcome, 'client_gone');
    assert.equal(row.estimated, false, 'the upstream session was ended, so its usage is final');
    const upstream = stack.emulator.sessions.at(-1)!;
    assert.ok(
      upstream.received.some((r) => r.kind === 'end'),
      'the upstream was sent end',
    );
    assert.equal(upstream.closeCode, 1000);
  });
});
