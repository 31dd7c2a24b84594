// Hostile clients, each in a process of its own (flush-flooder.ts): about 4 s of Ogg audio in one
// message (paced out at real time), then `{"type":"flush"}` frames and an `end` in one write. uWS
// hands a burst from another process over in one turn of the event loop, however long, so the
// replica must stay responsive throughout (/healthz, another session's flushes, a new client's
// config, each within 1 s): 200,000 flushes are taken, coalesced (the upstream gets a bounded number)
// and answered in order, and the `end` behind them is answered; three million are more than a socket
// may have waiting, and that client is closed; so is a client whose burst comes when others' bursts
// already filled the turn. The gateway's heap stays bounded. Real sockets: the
// attacker's raw WebSocket frames → uWS gateway → upstream emulator (the gateway and the emulator in
// this process, so its heap and the emulator's record are read here).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { watchHealth } from '../support/health.js';
import { metric } from '../support/metrics.js';
import { transcribeUrl } from '../support/raw-client.js';
import { configured, startStack, type Stack, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';
import type { Tally } from './flush-flooder.js';

/** The bound on any stall a flood causes: health checks and other sessions are answered within it. */
const RESPONSIVE_MS = 1000;
const OGG_CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg' };

// The gateway runs in this process: its heap after a full collection is what it retains.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The attacker's process: `next()` resolves with each JSON line it prints; `go()` starts its flood. */
function attacker(stack: Stack, token: string, flushes: number) {
  const script = fileURLToPath(new URL('./flush-flooder.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, FLOOD_URL: transcribeUrl(stack.base, token), FLOOD_FLUSHES: String(flushes) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    async next<T>(): Promise<T> {
      const { value, done } = await lines.next();
      if (done) throw new Error(`the attacker exited (${child.exitCode}) without its answer`);
      return JSON.parse(value as string) as T;
    },
    go: () => child.stdin.write('go\n'),
  };
}

/** Another session's flushes, one every 200 ms until `stop()`: resolves with the slowest answer's delay. */
function flushRoundTrips(c: TestClient): { stop(): Promise<number> } {
  let running = true;
  const slowest = (async () => {
    let worst = 0;
    while (running) {
      const asked = performance.now();
      c.sendJson({ type: 'flush' });
      await c.next('flushed', 30_000);
      worst = Math.max(worst, performance.now() - asked);
      await delay(200);
    }
    return worst;
  })();
  return {
    stop: () => {
      running = false;
      return slowest;
    },
  };
}

/** A new client's config, answered: how long it took. */
async function newcomer(stack: Stack): Promise<number> {
  const c = await stack.connect('transcribe');
  const asked = performance.now();
  await configured(c, OGG_CONFIG);
  const took = performance.now() - asked;
  c.sendJson({ type: 'end' });
  await c.next('ended');
  return took;
}

/** For `ms` from now: /healthz asked every 100 ms, `bystander`'s flushes, and (halfway) a new client's
 *  config, each asserted answered within 1 s; `each()` runs after every health answer. */
async function assertResponsive(stack: Stack, bystander: TestClient, ms: number, each?: () => void): Promise<void> {
  const others = flushRoundTrips(bystander);
  let late: Promise<number> | undefined;
  const slowest = await watchHealth(stack.gateway.server.port, ms, (leftMs) => {
    each?.();
    if (!late && leftMs < ms / 2) late = newcomer(stack);
  });
  const slowestOther = await others.stop();
  assert.ok(slowest < RESPONSIVE_MS, `/healthz answered within 1 s throughout (slowest ${slowest.toFixed(0)} ms)`);
  assert.ok(
    slowestOther < RESPONSIVE_MS,
    `another session's flushes were answered within 1 s (slowest ${slowestOther.toFixed(0)} ms)`,
  );
  const config = await late!;
  assert.ok(config < RESPONSIVE_MS, `a new client's config was answered within 1 s (in ${config.toFixed(0)} ms)`);
}

describe('a flood of flush messages from another process', () => {
  let stack: Stack;
  let bystander: TestClient;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1' });
    bystander = await stack.connect('transcribe');
    await configured(bystander, OGG_CONFIG);
  });
  afterAll(() => stack.close());

  it(
    '200,000: the replica stays responsive, the upstream gets few flushes, every answer comes in order, end is answered',
    { timeout: 120_000 },
    async () => {
      const flushes = 200_000;
      const flood = attacker(stack, await stack.token('openid transcribe'), flushes);
      const { sessionId } = await flood.next<{ sessionId: string }>();
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      flood.go();
      await flood.next<{ sent: number }>();
      // Through the audio's 4 s, the flood and its answers.
      let heapPeak = 0;
      await assertResponsive(stack, bystander, 8_000, () => {
        heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
      });

      const t = await flood.next<Tally>();
      assert.equal(t.closed, undefined, `the attacker's socket stayed open until its end was answered`);
      assert.ok(
        t.endMs! < 30_000,
        `the attacker's end, behind its flood, was answered (${t.endMs!.toFixed(0)} ms after the flood was sent)`,
      );
      const upstream = stack.emulator.sessions.find((s) => s.sessionId === sessionId)!;
      const upstreamFlushes = upstream.received.filter((r) => r.kind === 'flush').length;
      // One at a time, each after the last one's answer: never one per client flush.
      assert.ok(
        upstreamFlushes >= 1 && upstreamFlushes <= flushes / 1000,
        `the upstream got a bounded number of flushes (${upstreamFlushes} for ${flushes})`,
      );
      // Each flush the gateway took is answered by `flushed` then `delta_usage`, all before the end's
      // usage; those past the bound were refused, told once per upstream answer, not one by one.
      assert.ok(t.flushed >= 1, 'flushes were answered');
      assert.ok(
        t.refusals >= 1 && t.refusals <= upstreamFlushes,
        `refused flushes were told, at most once per upstream answer (${t.refusals})`,
      );
      assert.ok(t.inOrder, 'flushed, delta_usage, in pairs, then usage, then ended');
      assert.ok(
        t.credits > 0 && t.credits <= t.usage! + 1e-9,
        `the deltas add up to at most the usage (${t.credits} of ${t.usage})`,
      );

      gc();
      const retained = process.memoryUsage().heapUsed - heapBefore;
      assert.ok(
        heapPeak - heapBefore < 100 * 2 ** 20,
        `the heap stayed bounded during the flood (+${((heapPeak - heapBefore) / 2 ** 20).toFixed(0)} MB at its peak)`,
      );
      assert.ok(retained < 20 * 2 ** 20, `nothing of the flood is retained (+${(retained / 2 ** 20).toFixed(1)} MB)`);
    },
  );

  it(
    'three million: more than a socket may have waiting; that client is closed and the replica stays responsive',
    { timeout: 120_000 },
    async () => {
      const flood = attacker(stack, await stack.token('openid transcribe'), 3_000_000);
      await flood.next<{ sessionId: string }>();
      flood.go();
      await flood.next<{ sent: number }>();
      await assertResponsive(stack, bystander, 5_000);
      const t = await flood.next<Tally>();
      // 1008 with its reason, or 1006 when the client's unsent bytes made the close a reset first.
      assert.ok(t.closed === 1008 || t.closed === 1006, `the flooding client was closed (${t.closed ?? 'not closed'})`);
      assert.equal(
        await metric(stack.gateway.server.adminPort, 'speech_gateway_refusals_total{reason="client_flood"}'),
        1,
      );
      bystander.sendJson({ type: 'flush' });
      await bystander.next('flushed');
    },
  );

  it(
    'twelve clients at once, 250,000 each: the replica stays responsive; each is answered to its end or closed',
    { timeout: 120_000 },
    async () => {
      // Each under a socket's bound, together three million in the turns uWS reads them in.
      const floods = [];
      for (let i = 0; i < 12; i++) {
        const flood = attacker(stack, await stack.token('openid transcribe'), 250_000);
        await flood.next<{ sessionId: string }>();
        floods.push(flood);
      }
      for (const flood of floods) flood.go();
      for (const flood of floods) await flood.next<{ sent: number }>();
      await assertResponsive(stack, bystander, 6_000);
      for (const flood of floods) {
        const t = await flood.next<Tally>();
        if (t.closed === undefined) assert.ok(t.inOrder && t.last === 'ended', 'answered in order to its end');
        else assert.ok(t.closed === 1008 || t.closed === 1006, `closed as flooding (${t.closed})`);
      }
    },
  );
});
