// A handover whose seam falls just before the client's last audio. The vendor SDK, closed 1012 there,
// reconnects with what it queued meanwhile (here only the stream's last Opus block), its config and
// its `end`, all at once. The successor checks that the bytes after a handover continue the stream
// by looking past the first element to the next one; with none after it, that block waited for ever
// and its final was lost, although the session ended and the client got its `ended`. Two real
// gateway processes share one redis-server and the emulator; a hand-written client plays the SDK so
// that the seam is exactly there.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { WebmParser } from '../../src/audio/containers/webm.js';
import { replicaUrl, startCluster, type Cluster } from '../support/cluster.js';
import { mediaSeconds } from '../support/emulator.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
/** Where the stream's last element (one Opus block) starts. */
const lastBlockAt = stream.length - new WebmParser().push(stream).at(-1)!.bytes.length;

describe("a handover just before the end of the client's audio", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { MAX_SESSIONS_PER_TENANT: '1', DRAIN_SECONDS: '20', RESUME_GRACE_SECONDS: '10' });
  });
  afterAll(() => cluster?.close());

  it('the last block, sent to the successor with the config and end, is transcribed: the finals reach the end of the audio', async () => {
    const tenant = 'handover-end';
    const key = newResumeKey();
    const first = await openClient(await replicaUrl(cluster, 0, tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (let at = 0; at < lastBlockAt; at += 16_000) {
      first.send(stream.subarray(at, Math.min(at + 16_000, lastBlockAt)));
      await delay(100);
    }
    await first.next('transcript', 10_000);

    // No audio comes after the drain starts: the owner closes 1012 once its wait for the next piece ends.
    const exit = cluster.stop(0);
    assert.equal((await first.closed).code, 1012);
    // As the SDK reconnects: what it queued (the last block), then its config, then its end.
    const second = await openClient(await replicaUrl(cluster, 1, tenant, key));
    second.send(stream.subarray(lastBlockAt));
    second.sendJson({ type: 'config', configuration });
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);
    assert.equal(await exit, 0, cluster.replicas[0].output().slice(-3000));

    const all = finals([...first.messages, ...second.messages]);
    const total = mediaSeconds(pieces);
    for (let i = 1; i < all.length; i++)
      assert.ok(Math.abs(all[i].start - all[i - 1].end) < 0.01, `final ${i} follows the one before once`);
    assert.ok(
      Math.abs(all.at(-1)!.end - total) < 0.01,
      `the last final ends where the audio does (${all.at(-1)!.end} of ${total} s): ${all.map((f) => `${f.start}-${f.end}`).join(' ')}`,
    );
  });
});
