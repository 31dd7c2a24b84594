// Data residency across replicas: a session record (the one a replica takes a session over from) is
// taken over only by a request of the session's own environment; a record written before
// environments were kept counts as the default environment's. The hop carries the environment the
// sending replica resolved, for the owner to check against its session's.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createRecordStore,
  createReplicas,
  findResume,
  recordKeys,
  sealRecord,
  signHop,
  verifyHop,
  type HopIdentity,
  type SessionRecord,
} from '../../src/cluster/index.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { logger } from '../../src/telemetry/index.js';
import { replicaUrl, startCluster, type Cluster } from '../support/cluster.js';
import { englishConfiguration, openConfigured, refusal, resumeUrl } from '../support/stack.js';

const who = { tenant: 'acme', subject: 'user-1', endpoint: 'transcribe' as const };

/** A handed-over session of replica `a` (nobody resumed it yet) under `key`, in `environment`. */
async function handedOver(environment: string | undefined) {
  const key = `resume-key-${Math.random().toString(36).slice(2)}-0123456789`;
  const records = createRecordStore({ graceSeconds: 30 });
  const record: SessionRecord = {
    owner: 'a',
    ownerUrl: 'ws://127.0.0.1:9',
    state: 'handed_over',
    tenant: who.tenant,
    endpoint: who.endpoint,
    sessionKey: 'sk-1',
    subject: who.subject,
    environment,
    timeline: { kind: 'webm', offset: 0, finalUntil: 1, mediaReceived: 2, audioBytes: 100, segment: 0, seq: 1 },
    updatedAt: Date.now(),
  };
  const keys = recordKeys(key);
  await records.put(keys.hash, sealRecord(keys, record));
  const d = { records, replicas: createReplicas('b', logger), logger, legacyEnvironment: 'eu' };
  return (environment: string) => findResume(d, key, { ...who, environment });
}

describe('session records of another environment', () => {
  it('a us session is not taken over by an eu request, and is by a us one', async () => {
    const resume = await handedOver('us');
    assert.equal((await resume('eu')).route, 'forbidden');
    assert.equal((await resume('us')).route, 'restore');
  });

  it("a record without an environment is the default environment's", async () => {
    assert.equal((await (await handedOver(undefined))('us')).route, 'forbidden');
    assert.equal((await (await handedOver(undefined))('eu')).route, 'restore');
  });
});

describe('the internal hop', () => {
  const secret = 'x'.repeat(32);
  const key = 'resume-key-0123456789abcdef';
  const identity: HopIdentity = {
    ...who,
    environment: 'us',
    notices: false,
    owner: 'a',
    ownerUrl: 'ws://a',
    from: 'b',
  };
  const verified = (i: unknown) => {
    const h = signHop(secret, key, i as HopIdentity);
    return verifyHop(secret, key, h['x-sgw-identity'], h['x-sgw-hop']);
  };

  it('carries the environment; one that is not a string is a bad identity', () => {
    assert.equal((verified(identity) as HopIdentity).environment, 'us');
    assert.deepEqual(verified({ ...identity, environment: 5 }), { refused: 'bad identity' });
    // An older replica sends none: the owner takes it as its default environment (hop-route.ts).
    assert.equal((verified({ ...identity, environment: undefined }) as HopIdentity).environment, undefined);
  });
});

describe('two replicas serving eu and us, sharing Redis', () => {
  let cluster: Cluster;
  let us: Emulator;
  beforeAll(async () => {
    us = await startEmulator();
    // The plain pair is eu's (the default): the cluster's emulator; us has its own.
    const env = { ENVIRONMENTS: 'eu,us', UPSTREAM_URL_US: us.wsBase, AUTH_URL_US: us.authBase };
    cluster = await startCluster(2, { ...env, CLUSTER_SECRET: randomBytes(32).toString('hex') });
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
    await us?.close();
  });

  it("an eu session's key, presented on the other replica in us, is refused: its record is not taken over", async () => {
    const key = randomBytes(18).toString('base64url');
    const { client } = await openConfigured(
      await replicaUrl(cluster, 0, 'acme', key),
      englishConfiguration('transcribe'),
    );
    const token = await us.issueToken({ tenant: 'acme', scope: 'openid transcribe' });
    const url = `${resumeUrl(`ws://127.0.0.1:${cluster.replicas[1].port}`, 'acme', key, token)}&environment=us`;
    const r = await refusal(url);
    assert.equal(r.status, 403);
    assert.equal(r.body.error.id, 'RESUME_FORBIDDEN');
    assert.equal(us.sessions.length, 0, 'nothing reached the us upstream');
    client.sendJson({ type: 'end' });
    await client.next('ended');
  });
});
