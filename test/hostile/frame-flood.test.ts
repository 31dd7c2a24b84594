// Hostile client: half a million small text frames, each different, in one write (14 MB). uWS hands
// a socket's reads over about 5 MB at a time; the gateway handles a budget of a socket's frames per
// turn of the event loop and queues the rest within a byte bound. Past the bound the client is
// closed with 1008 (or, its unsent bytes still
// arriving, reset) while the replica stays responsive and another client's session runs whole.
// Real sockets: raw WebSocket frames → uWS gateway → upstream emulator, all in this process.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { watchHealth } from '../support/health.js';
import { clientFrame, openRawSocket } from '../support/raw-client.js';
import { startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const FRAMES = 500_000;

/** `n` client text frames, each `{"type":"flush","n":i}` with its own i. */
function distinctFrames(n: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < n; i++) parts.push(clientFrame(1, Buffer.from(`{"type":"flush","n":${i}}`)));
  return Buffer.concat(parts);
}

describe('a flood of distinct frames', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1' });
  });
  afterAll(() => stack.close());

  it(
    'closes the flooding client with 1008 once its queue passes the bound; the replica stays responsive',
    { timeout: 60_000 },
    async () => {
      const { ws, write } = await openRawSocket(stack);
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
      );
      ws.on('message', () => {});
      ws.send(JSON.stringify({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } }));
      await delay(300);
      write(distinctFrames(FRAMES));

      const slowest = await watchHealth(stack.gateway.server.port, 4_000);
      // 1008 with its reason, or 1006 when the client's unsent bytes made the close a reset first.
      const close = await closed;
      assert.ok(close.code === 1008 || close.code === 1006, `closed ${close.code} ${close.reason}`);
      if (close.code === 1008) assert.match(close.reason, /faster than the gateway reads/);
      assert.ok(slowest < 1000, `/healthz answered within 1 s throughout (slowest ${slowest.toFixed(0)} ms)`);

      const other = await stack.connect('transcribe');
      other.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
      await other.next('CONFIG_ACCEPTED');
      other.sendJson({ type: 'end' });
      await other.next('ended');
      const metrics = await (await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}/metrics`)).text();
      assert.match(metrics, /speech_gateway_refusals_total\{reason="client_flood"\} 1\b/);
    },
  );
});
