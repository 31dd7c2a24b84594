// The audit trail links a session's connections by a hash of its resume key. Session records in the
// same Redis are named by the key's plain SHA-256, so a plain hash in the audit set would tie a
// record to the subject the record seals. The link is keyed instead: the same on every replica of a
// deployment (from CLUSTER_SECRET), of no use to anyone reading Redis.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAudit, sessionWho, type AuditTrail } from '../../src/audit/index.js';
import type { SessionInfo } from '../../src/session/index.js';
import { logger } from '../../src/telemetry/index.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const SECRET = 'resume-link-test-cluster-secret-0123456789';

function infoWith(resumeKey: string): SessionInfo {
  return {
    sessionKey: 'session-1',
    endpoint: 'transcribe',
    tenant: 'base',
    environment: 'eu',
    clientToken: 'not-a-real-token',
    subject: 'dr-who',
    resumeKey,
  };
}

describe('the resume key link in the audit trail', () => {
  let redis: TestRedis;
  const prefix = `sg:audit:${randomBytes(4).toString('hex')}:`;
  const trails: AuditTrail[] = [];
  const trail = async (clusterSecret?: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-link-')), 'audit.jsonl');
    const t = await createAudit({
      file,
      redis: { url: redis.url },
      keyPrefix: prefix,
      retentionDays: 1,
      trustedProxies: 0,
      clusterSecret,
      logger,
    });
    trails.push(t);
    return t;
  };
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const t of trails) await t.close();
    await redis?.stop();
  });

  /** The link the audit set in Redis holds for `key`, recorded by `t`, read as any Redis reader would. */
  async function linkInRedis(t: AuditTrail, key: string): Promise<string> {
    t.record({ ...sessionWho(infoWith(key)), event: 'session_opened', outcome: 'ok' });
    await t.flush();
    const client = new Redis(redis.url);
    try {
      const members = await client.zrange(`${prefix}base`, 0, -1);
      assert.ok(
        members.every((m) => !m.includes(key)),
        'the resume key itself is in Redis',
      );
      const mine = members.map((m) => JSON.parse(m.slice(m.indexOf(' ') + 1))).at(-1);
      assert.match(mine.resumeKeyHash, /^[0-9a-f]{16}$/);
      return mine.resumeKeyHash as string;
    } finally {
      await client.quit();
    }
  }

  it('is not the SHA-256 that names session records: a Redis reader cannot tie a record to its subject', async () => {
    const key = randomBytes(18).toString('base64url');
    const link = await linkInRedis(await trail(SECRET), key);
    const plain = createHash('sha256').update(key).digest('hex');
    assert.ok(!plain.includes(link), 'the link is part of the plain SHA-256 of the key');
  });

  it('is the same on every replica with the same CLUSTER_SECRET, and differs without it or with another', async () => {
    const key = randomBytes(18).toString('base64url');
    const one = await linkInRedis(await trail(SECRET), key);
    const two = await linkInRedis(await trail(SECRET), key);
    assert.equal(one, two, 'two replicas of one deployment link the same connections');
    const other = await linkInRedis(await trail('another-deployment-secret-abcdefghijklmn'), key);
    const none = await linkInRedis(await trail(), key);
    assert.notEqual(other, one);
    assert.notEqual(none, one);
  });
});
