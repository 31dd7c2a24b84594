// Hostile review: an exception in any callback ends that one session with an error, never the
// process. The client socket is a sink that breaks (throws) at a chosen send, as a failing socket
// layer would; the session, upstream and ledger are real (test/support/session-harness.ts).
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startHarness, type Harness } from '../support/session-harness.js';

describe('a callback that throws', () => {
  let h: Harness;
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);

  beforeAll(async () => {
    h = await startHarness();
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    await h.close();
  });

  it('ends that session with INTERNAL and 1011, ends its upstream session gracefully, and nothing escapes', async () => {
    const sent: string[] = [];
    let closed: { code: number; reason: string } | undefined;
    const { finished, text } = await h.open({
      sendText(t) {
        if (String(t).includes('CONFIG_ACCEPTED')) throw new Error('socket layer broke');
        sent.push(String(t));
        return true;
      },
      close: (code, reason) => (closed = { code, reason }),
      backlog: () => 0,
      undelivered: () => [],
    });
    text({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await finished;

    assert.deepEqual(uncaught, [], 'no exception escaped to the process');
    assert.equal(closed?.code, 1011);
    const err = sent.map((t) => JSON.parse(t)).find((m) => m.type === 'error');
    assert.equal(err?.error.id, 'INTERNAL');
    const up = h.emulator.sessions.at(-1)!;
    assert.ok(
      up.received.some((r) => r.kind === 'end'),
      'the upstream session was ended, so its usage is final',
    );
    const row = (await h.ledger()).at(-1);
    assert.equal(row?.outcome, 'error');
    assert.ok(row?.end, 'closed in the ledger');
  });
});
