// Dead peers: an upstream or a client that stops answering without closing (a crashed host, a
// dropped NAT entry: no FIN, no RST) is found by WebSocket pings and ends its session as any lost
// peer does, never left hanging. Real sockets: client → uWS gateway → upstream emulator, with short
// ping intervals so the test takes seconds.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { metrics } from '../../src/telemetry/index.js';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack, type TestClient } from '../support/stack.js';
import { ledgerSessions, type LedgerSession } from '../support/usage-api.js';

const ogg = fixture('dictation.ogg'); // ~26 s
const API = 'test-usage-token';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The ledger row of the session that closed last, once `count` sessions are all closed. */
async function closedRow(stack: Stack, count: number): Promise<LedgerSession & { segments: unknown[] }> {
  for (let i = 0; i < 100; i++) {
    const rows = await ledgerSessions(stack, API);
    if (rows.length >= count && rows.every((r) => r.end !== null)) return rows.sort((a, b) => a.end!.localeCompare(b.end!)).at(-1) as LedgerSession & { segments: unknown[] };
    await sleep(50);
  }
  assert.fail(`no closed ledger row: ${JSON.stringify(await ledgerSessions(stack, API))}`);
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

/** Polls until `check` holds; fails with `what` after `ms`. */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !(await check()); await sleep(20)) {
    if (Date.now() > end) assert.fail(`${what}: not within ${ms} ms`);
  }
}

/** Ends the dictation and checks what its user sees: every final once, on one timeline, no error, 1000. */
async function endsCleanly(c: TestClient): Promise<void> {
  c.sendJson({ type: 'end' });
  await c.next('ended', 40_000);
  assert.equal((await c.closed).code, 1000);
  assert.ok(!c.types().includes('error'), `no error: ${JSON.stringify(c.messages.filter((m) => m.type === 'error'))}`);
  const finals = c.messages.filter((m) => m.type === 'transcript' && m.data.isFinal).map((m) => m.data);
  for (let i = 1; i < finals.length; i++) assert.equal(finals[i].start, finals[i - 1].end, `final ${i} follows final ${i - 1}`);
  assert.ok(finals.at(-1).end > 25, `the finals cover the whole dictation (last ends at ${finals.at(-1)?.end})`);
}

const FAST_PINGS = { UPSTREAM_PING_SECONDS: '0.3', UPSTREAM_PONG_TIMEOUT_SECONDS: '0.5', PACE: '8', USAGE_API_TOKEN: API };

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
      await until('the dead upstream is found', async () => (await failures('dead')) > dead);
      const waited = Date.now() - since;
      assert.ok(waited < 800 + 700, `found in ${waited} ms (ping 0.3 s + timeout 0.5 s)`);
      await until('a new upstream session is opened', () => stack.emulator.sessions.length > upstreams);
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
    await sleep(1500);
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
        await until('the upstream session is closed', () => lost.closed);
        await sleep(200); // still restarting: new sockets are closed with the code too
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
