// Hostile client: about 4 s of Ogg audio in one message (paced out at real time), then a million
// `{"type":"flush"}` frames. The replica must stay responsive (health, other clients), the upstream
// must get a bounded number of flushes (not one per client flush), the attacker's own flushes are
// answered in order and its `end` is answered, and the gateway's heap stays bounded.
// Real sockets: raw WebSocket frames → uWS gateway → upstream emulator, all in this process.
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import type WebSocket from 'ws';
import { watchHealth } from '../support/health.js';
import { openRawSocket, textFrames } from '../support/raw-client.js';
import { configured, startStack, type Stack } from '../support/stack.js';
import { delay } from '../support/wait.js';

const FLUSHES = 1_000_000;
const ogg = fixture('dictation.ogg'); // ~26 s, ~70 KB

// The gateway runs in this process: its heap after a full collection is what it retains.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** About `seconds` of the file, cut at an Ogg page boundary. */
function oggSeconds(seconds: number): Buffer {
  const cut = ogg.indexOf('OggS', Math.round((ogg.length * seconds) / 26));
  return ogg.subarray(0, cut);
}

const OGG_CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg' };

/** What the attacker was told, checked as it comes (a million answers are not kept). */
interface Tally {
  sessionId?: string;
  flushed: number;
  refusals: number;
  credits: number;
  usage?: number;
  /** every `flushed` followed by its `delta_usage`, all before `usage` then `ended` */
  inOrder: boolean;
  last?: string;
}

const TYPE = /"type"\s*:\s*"(\w+)"/;
const ZERO_DELTA = Buffer.from('{"type":"delta_usage","credits":0}');

function tally(t: Tally, data: Buffer): void {
  const type = TYPE.exec(data.toString('latin1', 0, 48))?.[1] ?? JSON.parse(data.toString()).type;
  if (type === 'transcript') return;
  if (type === 'CONFIG_ACCEPTED') t.sessionId = JSON.parse(data.toString()).sessionId;
  if (type === 'error' && JSON.parse(data.toString()).error.id === 'TOO_MANY_FLUSHES') return void t.refusals++;
  const before = t.last;
  t.last = type;
  if (type === 'flushed') {
    t.flushed++;
    if (before === 'flushed' || t.usage !== undefined) t.inOrder = false;
  } else if (type === 'delta_usage') {
    if (before !== 'flushed') t.inOrder = false;
    if (!data.equals(ZERO_DELTA)) t.credits += JSON.parse(data.toString()).credits;
  } else if (type === 'usage') {
    if (before === 'flushed') t.inOrder = false;
    t.usage = JSON.parse(data.toString()).credits;
  } else if (type === 'ended') {
    if (before !== 'usage') t.inOrder = false;
  } else if (type !== 'CONFIG_ACCEPTED') t.inOrder = false;
}

/** A client that tallies its messages instead of keeping them; resolves once configured. */
async function attackerClient(
  stack: Stack,
): Promise<{ ws: WebSocket; write(bytes: Buffer): void; t: Tally; ended: Promise<void> }> {
  const { ws, write } = await openRawSocket(stack);
  const t: Tally = { flushed: 0, refusals: 0, credits: 0, inOrder: true };
  const ended = new Promise<void>((resolve, reject) => {
    ws.on('message', (data: Buffer) => {
      tally(t, data);
      if (t.last === 'ended') resolve();
    });
    ws.on('close', (code) => reject(new Error(`closed ${code} before ended`)));
  });
  ended.catch(() => {});
  ws.send(JSON.stringify({ type: 'config', configuration: OGG_CONFIG }));
  while (!t.sessionId) await delay(10);
  return { ws, write, t, ended };
}

describe('a flood of flush messages', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '1' });
  });
  afterAll(() => stack.close());

  it(
    'the replica stays responsive, the upstream gets few flushes, every answer comes in order, end is answered',
    { timeout: 180_000 },
    async () => {
      const attacker = await attackerClient(stack);
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      attacker.ws.send(oggSeconds(4));
      await delay(100);
      // The flood, then `end` behind it on the same socket.
      const flood = Buffer.concat([textFrames('{"type":"flush"}', FLUSHES), textFrames('{"type":"end"}', 1)]);
      const sent = performance.now();
      attacker.write(flood);
      const ended = attacker.ended.then(() => performance.now() - sent);

      // Health answers within 1 s throughout (the audio's 4 s, the flood, and its answers): asked every
      // 100 ms, each answer within 1 s of the time it was due.
      let heapPeak = 0;
      let other: Promise<number> | undefined;
      const slowest = await watchHealth(stack.gateway.server.port, 9_000, (leftMs) => {
        heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
        // Once the audio is out and the flood is being answered, another client configures.
        if (!other && leftMs < 4_500) {
          other = (async () => {
            const c = await stack.connect('transcribe');
            const asked = performance.now();
            await configured(c, OGG_CONFIG);
            const took = performance.now() - asked;
            c.sendJson({ type: 'end' });
            await c.next('ended');
            return took;
          })();
        }
      });
      assert.ok(slowest < 1000, `/healthz answered within 1 s throughout (slowest ${slowest.toFixed(0)} ms)`);
      assert.ok(other, 'the other client was started');
      const otherConfig = await other;
      // Its set-up takes several turns of the event loop, each of which may wait behind a socket read of flushes.
      assert.ok(otherConfig < 5000, `another client's config was answered (in ${otherConfig.toFixed(0)} ms)`);

      const endTook = await ended;
      assert.ok(
        endTook < 30_000,
        `the attacker's end, behind its flood, was answered (${endTook.toFixed(0)} ms after the flood was sent)`,
      );

      const { t } = attacker;
      const upstream = stack.emulator.sessions.find((s) => s.sessionId === t.sessionId)!;
      const upstreamFlushes = upstream.received.filter((r) => r.kind === 'flush').length;
      // One at a time, each after the last one's answer: never one per client flush.
      assert.ok(
        upstreamFlushes >= 1 && upstreamFlushes <= FLUSHES / 1000,
        `the upstream got a bounded number of flushes (${upstreamFlushes} for ${FLUSHES})`,
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
});
