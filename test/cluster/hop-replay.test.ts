// A signed internal hop is good once: a captured hop request (its headers and URL) replayed within the
// signature's 30 s window is refused 403 HOP_FORBIDDEN, by the replica it was meant for and, since
// the used signatures are remembered in Redis, by a new process under the same REPLICA_ID too.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { recordKeyHash, signHop, type HopIdentity } from '../../src/cluster/index.js';
import { startCluster, type Cluster } from '../support/cluster.js';
import { newResumeKey } from '../support/sdk.js';
import { endpointPath, openClient, refusal, resumeUrl } from '../support/stack.js';
import { delay } from '../support/wait.js';

const SECRET = randomBytes(32).toString('hex');
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

describe('a replayed internal hop', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { CLUSTER_SECRET: SECRET, RESUME_GRACE_SECONDS: '10' });
  }, 60_000);
  afterAll(() => cluster?.close());

  it('is refused 403 HOP_FORBIDDEN once its signature was used, on its replica and after that replica restarts', async () => {
    const tenant = 'hop-replay';
    const key = newResumeKey();
    const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const client = await openClient(resumeUrl(`ws://127.0.0.1:${cluster.replicas[0].port}`, tenant, key, token));
    client.sendJson({ type: 'config', configuration });
    await client.next('CONFIG_ACCEPTED');

    const subject = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sub as string;
    const identity: HopIdentity = {
      tenant,
      subject,
      endpoint: 'transcribe',
      notices: false,
      owner: cluster.replicas[0].id,
      ownerUrl: `ws://127.0.0.1:${cluster.replicas[0].adminPort}`,
      from: cluster.replicas[1].id,
    };
    const headers = signHop(SECRET, recordKeyHash(key), identity);
    const url = `ws://127.0.0.1:${cluster.replicas[0].adminPort}/internal/hop${endpointPath('transcribe')}?session=${recordKeyHash(key)}`;
    const hop = await openClient(url, undefined, headers); // the genuine hop: it takes the session over
    hop.ws.close();
    assert.equal((await client.closed).code, 4409, "the session's socket was replaced by the hop");
    await delay(200);

    const replay = await refusal(url, undefined, headers);
    assert.equal(replay.status, 403);
    assert.equal(replay.body.error.id, 'HOP_FORBIDDEN');

    await cluster.kill(0);
    await cluster.start(0, { sameId: true }); // a new process that has seen no hop
    const again = await refusal(url, undefined, headers);
    assert.equal(again.status, 403, 'the used signature is remembered in Redis');
    assert.equal(again.body.error.id, 'HOP_FORBIDDEN');
  }, 60_000);
});
