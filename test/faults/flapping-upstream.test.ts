// An upstream that accepts each config and drops the socket 30 ms later. Each replacement "works",
// so a budget that starts again at every replacement never runs out: the session must end within
// its budget with UPSTREAM_UNSTABLE, the audio replayed to the upstream bounded (4x what the client
// sent), the client told, and its ledger session ended. One that stays up 10 s between losses gives
// each loss the whole budget again. The flapping upstream is a small ws server here; the emulator
// only issues and verifies the tokens.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack, type TestClient } from '../support/stack.js';
import { ledgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const API = 'test-usage-token';
const ogg = fixture('dictation.ogg'); // ~26 s, ~70 KB

interface Flapper {
  url: string;
  /** upstream sessions that got CONFIG_ACCEPTED */
  accepted: number;
  /** audio bytes received over every upstream session */
  audioBytes: number;
  close(): Promise<void>;
}

/** Accepts each config, then drops the TCP connection (no close frame) `dropMs` later. */
async function startFlapper(dropMs: number): Promise<Flapper> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => wss.once('listening', resolve));
  const f: Flapper = {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    accepted: 0,
    audioBytes: 0,
    close: () =>
      new Promise((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => resolve());
      }),
  };
  wss.on('connection', (ws) => {
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) return void (f.audioBytes += data.length);
      const message = JSON.parse(data.toString()) as { type: string; configuration?: unknown };
      if (message.type !== 'config') return;
      f.accepted++;
      ws.send(
        JSON.stringify({ type: 'CONFIG_ACCEPTED', sessionId: randomUUID(), configuration: message.configuration }),
      );
      setTimeout(() => ws.terminate(), dropMs);
    });
  });
  return f;
}

type Segments = { segments: Array<{ upstreamSessionId: string; credits: number }> };

describe('an upstream that accepts each config and drops it soon after', () => {
  let emulator: Emulator | undefined;
  let flapper: Flapper;
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.close();
    await flapper?.close();
    await emulator?.close();
  });

  async function dictation(env: Record<string, string>, dropMs = 30): Promise<{ c: TestClient; sent: number }> {
    flapper = await startFlapper(dropMs);
    emulator = await startEmulator();
    stack = await startStack({ USAGE_API_TOKEN: API, ...env, UPSTREAM_URL: flapper.url }, { emulator });
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await c.next('CONFIG_ACCEPTED');
    c.send(ogg);
    return { c, sent: ogg.length };
  }

  async function endedInLedger(s: Stack) {
    for (let i = 0; i < 100; i++) {
      const rows = await ledgerSessions(s, API);
      if (rows.length > 0 && rows.every((r) => r.end !== null)) return rows;
      await delay(50);
    }
    return ledgerSessions(s, API);
  }

  async function assertEndedUnstable(c: TestClient, sent: number, withinMs: number, started: number) {
    const closed = await Promise.race([c.closed, new Promise<undefined>((r) => setTimeout(r, withinMs))]);
    const took = performance.now() - started;
    assert.ok(
      closed,
      `the session ended within ${withinMs} ms (${flapper.accepted} upstream sessions, ${flapper.audioBytes} bytes replayed for ${sent})`,
    );
    assert.equal(closed.code, 1014);
    const errors = c.messages.filter((m) => m.type === 'error');
    assert.deepEqual(
      errors.map((m) => m.error.id),
      ['UPSTREAM_UNSTABLE'],
      'the client was told, once',
    );
    assert.ok(
      flapper.audioBytes <= 5 * sent,
      `at most the audio once and 4 replays of it went upstream (${flapper.audioBytes} bytes for ${sent})`,
    );

    const rows = await endedInLedger(stack!);
    assert.equal(rows.length, 1);
    const [row] = rows;
    assert.notEqual(row.end, null, 'the ledger session is ended');
    assert.equal(row.outcome, 'upstream_lost');
    assert.equal(row.credits, 0, 'no upstream session reported usage');
    const segments = (row as unknown as Segments).segments;
    assert.ok(
      segments.length >= 1 && segments.length <= flapper.accepted,
      `one ledger segment per upstream session the audio went to (${segments.length} of ${flapper.accepted})`,
    );
    return { took, errors };
  }

  it(
    'the default budget (6 attempts, 30 s): the session ends with UPSTREAM_UNSTABLE, usage recorded',
    { timeout: 60_000 },
    async () => {
      const started = performance.now();
      const { c, sent } = await dictation({ PACE: '1' });
      await assertEndedUnstable(c, sent, 35_000, started);
      assert.ok(flapper.accepted <= 7, `the first upstream session and at most 6 replacements (${flapper.accepted})`);
    },
  );

  it(
    'few attempts allowed: the attempts run out although each replacement was accepted',
    { timeout: 60_000 },
    async () => {
      const started = performance.now();
      const { c, sent } = await dictation({ PACE: '1', UPSTREAM_RECONNECT_ATTEMPTS: '3' });
      const { errors } = await assertEndedUnstable(c, sent, 15_000, started);
      assert.match(errors[0].error.details, /lost again 3 times/);
      assert.equal(flapper.accepted, 4, 'the first upstream session and 3 replacements');
    },
  );

  it(
    'an upstream that stays up 10 s between losses: each loss has the whole budget again',
    { timeout: 60_000 },
    async () => {
      const { c } = await dictation({ PACE: '1', UPSTREAM_RECONNECT_ATTEMPTS: '1', END_TIMEOUT_MS: '500' }, 10_300);
      while (flapper.accepted < 3 && c.ws.readyState === c.ws.OPEN) await delay(100);
      assert.deepEqual(
        c.messages.filter((m) => m.type === 'error'),
        [],
        'two losses, one attempt each: no error',
      );
      assert.equal(c.ws.readyState, c.ws.OPEN);
    },
  );

  it('many attempts allowed: the replay bound ends the session, not the upstream', { timeout: 60_000 }, async () => {
    const started = performance.now();
    const { c, sent } = await dictation({
      PACE: '1000',
      UPSTREAM_RECONNECT_ATTEMPTS: '100',
      UPSTREAM_RECONNECT_SECONDS: '600',
    });
    const { errors } = await assertEndedUnstable(c, sent, 30_000, started);
    assert.match(errors[0].error.details, /replayed/);
  });
});
