// The messages of one upstream read reach the client inside one batch (on a real socket: corked,
// one write instead of one per message).
// The emulator answers a flush with its last transcript, `flushed` and `delta_usage` at once, and an
// end with `usage` and `ended`: each such group must arrive in one batch, in order, nothing dropped.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { startHarness, type Harness } from '../support/session-harness.js';

const ogg = fixture('dictation.ogg');

describe('output caused by one upstream read', () => {
  let h: Harness;
  beforeAll(async () => (h = await startHarness()));
  afterAll(async () => h?.close());

  it('goes to the client in one batch, in order, with nothing lost', async () => {
    const batches: string[][] = [];
    let open: string[] | undefined;
    const all: string[] = [];
    const { session, finished, text } = await h.open({
      sendText(t) {
        const type = JSON.parse(String(t)).type as string;
        all.push(type);
        open?.push(type);
        return true;
      },
      close: () => undefined,
      backlog: () => 0,
      undelivered: () => [],
      batch(send) {
        open = [];
        try {
          send();
        } finally {
          if (open.length > 0) batches.push(open);
          open = undefined;
        }
      },
    });
    const arrived = async (type: string) => {
      while (!all.includes(type)) await new Promise((r) => setTimeout(r, 10));
    };
    text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await arrived('CONFIG_ACCEPTED');
    const piece = ogg.subarray(0, 40_000);
    session.onClientBinary(piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.length) as ArrayBuffer);
    text({ type: 'flush' });
    await arrived('flushed');
    text({ type: 'end' });
    await finished;

    assert.deepEqual(all.slice(-2), ['usage', 'ended'], `the session ends as before: ${all.join()}`);
    assert.ok(
      batches.some((b) => b.includes('flushed') && b.includes('delta_usage')),
      `flushed and its delta_usage in one batch: ${JSON.stringify(batches)}`,
    );
    assert.ok(
      batches.some((b) => b.join() === 'usage,ended'),
      `usage and ended in one batch: ${JSON.stringify(batches)}`,
    );
    assert.deepEqual(batches.flat(), all, 'everything the upstream caused went out in batches, in order');
  });

  // A batch is written when it ends (uWS's cork). What hears of a delivered final (the session record,
  // which a successor after a crash goes on from) must hear of it after that write: told while the
  // final still waits in the cork, a crash in between leaves a record that says the client has a
  // final it never got, and the successor never sends it again.
  it('tells of a delivered final only once the batch holding it is written', async () => {
    let corked: string[] | undefined;
    const written: string[] = [];
    const heard: Array<{ until: number; corkedFinals: number }> = [];
    const isFinal = (t: string) => (JSON.parse(t) as { data?: { isFinal?: boolean } }).data?.isFinal === true;
    const { session, finished, text } = await h.open({
      sendText(t) {
        (corked ?? written).push(String(t));
        return true;
      },
      close: () => undefined,
      backlog: () => 0,
      undelivered: () => [],
      batch(send) {
        corked = [];
        try {
          send();
        } finally {
          written.push(...corked);
          corked = undefined;
        }
      },
    });
    session.on((e) => {
      if (e.type === 'final_delivered')
        heard.push({ until: e.until, corkedFinals: (corked ?? []).filter(isFinal).length });
    });
    text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    while (!written.some((t) => t.includes('CONFIG_ACCEPTED'))) await new Promise((r) => setTimeout(r, 10));
    const piece = ogg.subarray(0, 40_000);
    session.onClientBinary(piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.length) as ArrayBuffer);
    text({ type: 'flush' });
    text({ type: 'end' });
    await finished;

    assert.ok(written.filter(isFinal).length > 0, 'the upstream sent finals');
    assert.ok(heard.length > 0, 'finals were told delivered');
    assert.deepEqual(
      heard.filter((x) => x.corkedFinals > 0),
      [],
      'no final was told delivered while it waited in the unwritten batch',
    );
  });
});
