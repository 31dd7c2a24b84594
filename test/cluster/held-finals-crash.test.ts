// Finals that wait for an absent client are not yet the client's. A client drops (its network goes,
// no close frame) while its session still has audio on its way upstream; the finals of that audio
// are kept for it. The session's record must not say the client has them: when the replica then
// dies, the replica the client comes back to goes on from the record, and a client that resends from
// the `audioBytes` it is given must get every final once, those kept ones too. Two real gateway
// processes share one redis-server and the emulator.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { replicaUrl, resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { mediaSeconds } from '../support/emulator.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

describe('finals kept for a client that dropped, then its replica dies', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    // Real-time pacing: the audio the client sent ahead goes upstream after it dropped.
    cluster = await startCluster(2, { PACE: '1', RESUME_GRACE_SECONDS: '20' });
  });
  afterAll(() => cluster?.close());

  it('the client that resends from its audioBytes gets every final once, the kept ones too', async () => {
    const tenant = 'held-finals-crash';
    const key = newResumeKey();
    const first = await openClient(await replicaUrl(cluster, 0, tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of pieces) first.send(piece); // far ahead of real time: held for pacing
    await first.next('transcript', 10_000);
    first.ws.terminate(); // gone without a close frame: the session keeps its output for it
    await delay(3000); // finals of the paced audio come meanwhile, and the record's position is written
    await cluster.kill(0);
    try {
      const second = await openClient(await replicaUrl(cluster, 1, tenant, key));
      second.sendJson({ type: 'config', configuration });
      const accepted = await second.next('CONFIG_ACCEPTED', 30_000);
      assert.equal(accepted.resumed, true);
      await resendFrom(second, stream, accepted.audioBytes);
      second.sendJson({ type: 'end' });
      await second.next('ended', 30_000);

      const all = finals([...first.messages, ...second.messages]);
      const said = all.map((f) => `${f.start}-${f.end}`).join(' ');
      for (let i = 1; i < all.length; i++) {
        const overlap = all[i - 1].end - all[i].start;
        assert.ok(overlap <= 0.06 + 1e-6 && overlap >= -0.01, `final ${i} follows the one before, once: ${said}`);
      }
      assert.ok(Math.abs(all.at(-1)!.end - mediaSeconds(pieces)) < 0.01, `the finals reach the end: ${said}`);
    } finally {
      await cluster.start(0);
    }
  });
});
