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

/** The ledger row of the session the emulator's latest upstream session belongs to, once closed. */
async function closedRow(stack: Stack, count: number): Promise<LedgerSession> {
  for (let i = 0; i < 100; i++) {
    const rows = await ledgerSessions(stack, API);
    if (rows.length >= count && rows.every((r) => r.end !== null)) return rows.sort((a, b) => a.end!.localeCompare(b.end!)).at(-1)!;
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

describe('an upstream that stops answering', () => {
  let stack: Stack;
  let sessions = 0;
  beforeAll(async () => {
    stack = await startStack({ UPSTREAM_PING_SECONDS: '0.3', UPSTREAM_PONG_TIMEOUT_SECONDS: '0.5', PACE: '8', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('half-open mid-dictation: the client is told within ping + timeout, close 1014, the ledger closes it estimated', async () => {
    const c = await dictating(stack);
    sessions++;
    const dead = await failures('dead');
    stack.emulator.faults.halfOpen = true;
    const since = Date.now();
    try {
      const err = await c.next('error', 5000);
      const waited = Date.now() - since;
      assert.equal(err.error.id, 'UPSTREAM_UNAVAILABLE');
      assert.match(err.error.details, /stopped answering \(no pong in 0\.5 s\)/);
      assert.ok(waited < 0.8 * 1000 + 700, `found in ${waited} ms (ping 0.3 s + timeout 0.5 s)`);
      assert.equal((await c.closed).code, 1014);
    } finally {
      stack.emulator.faults.halfOpen = false;
    }
    const row = await closedRow(stack, sessions);
    assert.equal(row.outcome, 'upstream_lost');
    assert.equal(row.estimated, true, 'no final usage came: the provisional figure, marked estimated');
    assert.equal(await failures('dead'), dead + 1, 'counted as a dead upstream');
  });

  it('a stalled upstream still answers pings: a quiet spell longer than ping + timeout is not a death', async () => {
    const c = await dictating(stack);
    sessions++;
    stack.emulator.faults.stall = true;
    await sleep(1500);
    stack.emulator.faults.stall = false;
    c.sendJson({ type: 'end' });
    await c.next('ended', 40_000);
    assert.equal((await c.closed).code, 1000);
    assert.ok(!c.types().includes('error'), `no error: ${JSON.stringify(c.messages.filter((m) => m.type === 'error'))}`);
    const row = await closedRow(stack, sessions);
    assert.equal(row.outcome, 'ended');
    assert.equal(row.estimated, false);
  });

  for (const code of [1001, 1012]) {
    it(`going away with ${code} (an upstream restarting): the client gets UPSTREAM_CLOSED and 1014, the ledger closes it estimated`, async () => {
      const c = await dictating(stack);
      sessions++;
      const closed = await failures('closed');
      stack.emulator.faults.goingAway = code;
      try {
        const err = await c.next('error', 5000);
        assert.equal(err.error.id, 'UPSTREAM_CLOSED');
        assert.match(err.error.details, new RegExp(`code ${code}`));
        assert.equal((await c.closed).code, 1014);
      } finally {
        stack.emulator.faults.goingAway = null;
      }
      assert.equal(stack.emulator.sessions.at(-1)!.closeCode, code);
      const row = await closedRow(stack, sessions);
      assert.equal(row.outcome, 'upstream_lost');
      assert.equal(row.estimated, true);
      assert.equal(await failures('closed'), closed + 1, 'counted as closed by the upstream');
    });
  }
});
