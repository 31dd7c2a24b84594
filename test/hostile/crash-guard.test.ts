// Hostile review: an exception in any callback ends that one session with an error, never the
// process. A real Session against the real upstream emulator and a real in-process ledger; the
// client socket is a sink that breaks (throws) at a chosen send, as a failing socket layer would.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createUpstreamCredentials } from '../../src/auth/index.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { Session, type ClientSink } from '../../src/session/index.js';
import { logger } from '../../src/telemetry/index.js';
import { createUsage, type Usage } from '../../src/usage/index.js';

describe('a callback that throws', () => {
  let emulator: Emulator;
  let usage: Usage;
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);

  beforeAll(async () => {
    emulator = await startEmulator();
    usage = await createUsage({ journalDir: mkdtempSync(join(tmpdir(), 'sgw-crash-')), retentionDays: 1, maxSessionsPerTenant: 0, apiToken: 'x' });
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    await usage.close();
    await emulator.close();
  });

  function open(sink: ClientSink) {
    const session = new Session(
      {
        settings: {
          upstreamWsBase: emulator.wsBase, configTimeoutMs: 5000, streamMaxSeconds: 60, chunkMs: 250, pace: 20,
          maxBufferedAudioBytes: 1 << 20, endTimeoutMs: 5000,
        },
        credentials: createUpstreamCredentials({ mode: 'passthrough', authUrl: emulator.authBase }),
        ledger: usage.ledger,
        limiter: usage.limiter,
        logger,
      },
      { sessionKey: `crash-${Math.random()}`, endpoint: 'transcribe', tenant: 'base', clientToken: '' },
      sink,
    );
    const finished = new Promise<void>((resolve) => (session.onFinished = () => resolve()));
    return { session, finished };
  }

  it('ends that session with INTERNAL and 1011, ends its upstream session gracefully, and nothing escapes', async () => {
    const sent: string[] = [];
    let closed: { code: number; reason: string } | undefined;
    const { session, finished } = open({
      sendText(text) {
        if (String(text).includes('CONFIG_ACCEPTED')) throw new Error('socket layer broke');
        sent.push(String(text));
        return true;
      },
      close: (code, reason) => (closed = { code, reason }),
    });
    const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
    Object.assign(session.info, { clientToken: token });
    const config = Buffer.from(JSON.stringify({ type: 'config', configuration: { primaryLanguage: 'en' } }));
    session.onClientText(config.buffer.slice(config.byteOffset, config.byteOffset + config.length));
    await finished;

    assert.deepEqual(uncaught, [], 'no exception escaped to the process');
    assert.equal(closed?.code, 1011);
    const err = sent.map((t) => JSON.parse(t)).find((m) => m.type === 'error');
    assert.equal(err?.error.id, 'INTERNAL');
    const up = emulator.sessions.at(-1)!;
    assert.ok(up.received.some((r) => r.kind === 'end'), 'the upstream session was ended, so its usage is final');
    const answer = await usage.api.handle({ method: 'GET', path: '/v1/usage/sessions', query: new URLSearchParams({ tenant: 'base' }), authorization: 'Bearer x' });
    const row = (answer?.body as { sessions: Array<{ outcome: string; end: string | null }> }).sessions.at(-1);
    assert.equal(row?.outcome, 'error');
    assert.ok(row?.end, 'closed in the ledger');
  });
});
