// The probe that tells a dead owner from a live one: a replica whose own event loop is busy when the
// probe's answer comes must still see the refusal of a dead owner's address, not take the owner for
// alive (a resume would then be sent to a dead replica instead of taking its session over).
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'vitest';
import { addressRefuses } from '../../src/cluster/index.js';

/** A port nothing listens on any more. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* a replica busy with other sessions */
  }
}

test("a dead owner's address is seen refusing even when this replica's event loop was blocked past the probe's timeout", async () => {
  const port = await closedPort();
  const probe = addressRefuses(`ws://127.0.0.1:${port}`, 20);
  busy(200);
  assert.equal(await probe, true);
});

test('an address that accepts is not taken for dead, blocked loop or not', async () => {
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const probe = addressRefuses(`ws://127.0.0.1:${(server.address() as net.AddressInfo).port}`, 20);
    busy(200);
    assert.equal(await probe, false);
  } finally {
    server.close();
  }
});
