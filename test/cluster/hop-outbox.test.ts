// The owner's record of what it sent through the internal hop: the relaying replica's counts (in its
// pings) say what reached the client; after its last count, exactly the rest is what the client
// missed. Without a last count nothing is claimed, and a relay that never confirms cannot make the
// owner hold more than its bound.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { HopOutbox } from '../../src/cluster/index.js';

const ping = (text: string) => new Uint8Array(Buffer.from(text)).buffer as ArrayBuffer;
const messages = (n: number) => Array.from({ length: n }, (_, i) => `{"type":"transcript","n":${i}}`);

describe("the owner's end of a hop", () => {
  it("after the relay's last count, what it did not pass on, in order", () => {
    const outbox = new HopOutbox();
    for (const m of messages(40)) outbox.sent(m);
    outbox.confirmed(ping('d16'));
    outbox.confirmed(ping('d32'));
    assert.deepEqual(outbox.undelivered(), [], 'no last count yet: nothing is known to be missed');
    outbox.confirmed(ping('e35'));
    assert.deepEqual(outbox.undelivered(), messages(40).slice(35));
  });

  it('ignores pings that are not counts (a bare liveness ping, garbage)', () => {
    const outbox = new HopOutbox();
    for (const m of messages(3)) outbox.sent(m);
    for (const p of ['', 'x', 'e', 'e-1', 'e1.5', 'd9999999999999999', 'e1 ']) outbox.confirmed(ping(p));
    outbox.confirmed(ping('e0'));
    assert.deepEqual(outbox.undelivered(), messages(3));
  });

  it('holds at most 2 MiB for a relay that never confirms', () => {
    const outbox = new HopOutbox();
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 100; i++) outbox.sent(big);
    outbox.confirmed(ping('e0'));
    const kept = outbox.undelivered();
    assert.ok(kept.length * big.length <= 2 * 1024 * 1024 && kept.length >= 31, `${kept.length} messages kept`);
  });
});
