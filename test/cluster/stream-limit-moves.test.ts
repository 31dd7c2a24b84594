// STREAM_MAX_SECONDS counts from the session's first CONFIG_ACCEPTED, wherever the session goes:
// a /streams session whose replica is killed (taken over from its record) or drained (handed over)
// half-way still ends at the limit, not a whole limit after each move. Two real replicas, one
// redis-server, the emulator.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { openWhenReady, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { englishConfiguration, openConfigured, type TestClient } from '../support/stack.js';
import { delay } from '../support/wait.js';

const LIMIT_S = 12;
const chunks = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk
const whole = Buffer.concat(chunks);
const configuration = englishConfiguration('streams', 'audio/webm;codecs=opus');
const interaction = '6a1c2b7a-9d4e-4c1a-8b2f-6e5d4c3b2a11';

describe('the /streams time limit across moves', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { STREAM_MAX_SECONDS: String(LIMIT_S), RESUME_GRACE_SECONDS: '30' });
  }, 60_000);
  afterAll(() => cluster?.close());

  const url = (tenant: string, key: string, i: number) => async () => {
    const token = await cluster.emulator.issueToken({ tenant, scope: 'openid streams' });
    const q = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}`, resume: key });
    return `ws://127.0.0.1:${cluster.replicas[i].port}/audio-bridge/v2/interactions/${interaction}/streams?${q}`;
  };

  /** Pieces at real time from `from` until the socket closes or the stream is all sent. */
  async function stream(client: TestClient, from: number, until: number): Promise<void> {
    for (let off = from; off < until && client.ws.readyState === client.ws.OPEN; off += 4000) {
      client.send(whole.subarray(off, Math.min(off + 4000, until)));
      await delay(100);
    }
  }

  for (const move of ['killed', 'drained'] as const) {
    it(`a session whose replica is ${move} half-way ends at STREAM_MAX_SECONDS from its first CONFIG_ACCEPTED`, async () => {
      await cluster.allUp();
      const tenant = `limit-${move}`;
      const key = randomBytes(18).toString('base64url');
      const { client: first } = await openConfigured(await url(tenant, key, 0)(), configuration);
      const acceptedAt = Date.now();
      await stream(first, 0, Math.floor(whole.length / 2)); // about 4 s of audio
      await delay(4000); // its record and position are written; the move comes about 8 s in
      if (move === 'killed') await cluster.kill(0);
      else void cluster.stop(0);
      await first.closed;
      const { client: second, accepted } = await openWhenReady(url(tenant, key, 1), configuration, 60);
      assert.equal(accepted.resumed, true, 'the same session, on the other replica');
      await stream(second, accepted.audioBytes, whole.length);
      await second.next('ENDED', 30_000);
      const endedAfter = (Date.now() - acceptedAt) / 1000;
      assert.equal((await second.closed).code, 1000);
      assert.ok(
        endedAfter < LIMIT_S + 3,
        `ended ${endedAfter.toFixed(1)} s after the first CONFIG_ACCEPTED; the limit is ${LIMIT_S} s`,
      );
      assert.ok(endedAfter >= LIMIT_S - 0.5, `not before the limit: ${endedAfter.toFixed(1)} s`);
    }, 90_000);
  }
});
