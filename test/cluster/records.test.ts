// Session records in a real redis-server: ownership changes are compare-and-set (one of two
// racing replicas wins), records expire, the janitor gets a handed-over record once, and neither
// the raw resume key nor a token is ever stored.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createRecordStore, recordKeyHash, type RecordStore, type SessionRecord } from '../../src/cluster/records.js';
import { startRedis, type TestRedis } from '../usage/redis.js';
import { delay } from '../support/stack.js';

const KEY = 'resume-key-0123456789abcdefXYZ';

function record(owner: string, state: SessionRecord['state'] = 'live'): SessionRecord {
  return {
    v: 1, owner, ownerUrl: `ws://${owner}`, state, tenant: 'acme', subject: 'user-1', endpoint: 'transcribe',
    sessionKey: 'sk-1', config: { primaryLanguage: 'en' }, kind: 'webm', init: 'GkXfow==', offset: 0, finalUntil: 1.5,
    mediaReceived: 3, audioBytes: 1200, segment: 0, seq: 4, updatedAt: Date.now(),
  };
}

describe('session records in Redis', () => {
  let redis: TestRedis;
  let client: Redis;
  let store: RecordStore;
  const hash = recordKeyHash(KEY);

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
    store = createRecordStore({ redis: client, graceSeconds: 0 });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it('only the owner writes; a claim succeeds once, against the owner and state it expects', async () => {
    assert.equal(await store.put(hash, record('a')), true);
    assert.equal(await store.put(hash, record('b')), false, 'another replica cannot overwrite the owner\'s record');
    assert.equal((await store.get(hash))?.owner, 'a');

    assert.equal(await store.claim(hash, { owner: 'a', state: 'handed_over' }, record('b')), false, 'state differs');
    await store.put(hash, record('a', 'handed_over'), Date.now() + 60_000);
    const racing = await Promise.all(['b', 'c'].map((r) => store.claim(hash, { owner: 'a', state: 'handed_over' }, record(r))));
    assert.deepEqual(racing.sort(), [false, true], 'two replicas race: exactly one takes it over');
    const now = await store.get(hash);
    assert.ok(now && ['b', 'c'].includes(now.owner) && now.state === 'live');
    assert.deepEqual(await store.reap(Date.now() + 120_000), [], 'a claimed record is not the janitor\'s any more');

    await store.remove(hash, 'a');
    assert.ok(await store.get(hash), 'a former owner cannot delete it');
    await store.remove(hash, now.owner);
    assert.equal(await store.get(hash), undefined);
  });

  it('a handed-over record nobody claims goes to one janitor once', async () => {
    const h = recordKeyHash(`${KEY}-reap`);
    await store.put(h, record('a', 'handed_over'), Date.now() - 1);
    const [first, second] = await Promise.all([store.reap(Date.now()), store.reap(Date.now())]);
    assert.equal(first.length + second.length, 1);
    assert.equal([...first, ...second][0].sessionKey, 'sk-1');
    assert.equal(await store.get(h), undefined);
  });

  it('records expire after the grace (+30 s); the raw key and tokens are never stored', async () => {
    const h = recordKeyHash(`${KEY}-ttl`);
    await store.put(h, record('a'));
    const ttl = await client.pttl(`sgw:rec:${h}`);
    assert.ok(ttl > 29_000 && ttl <= 30_000, `TTL ${ttl} ms`);
    const short = createRecordStore({ redis: client, graceSeconds: -29.9 }); // 100 ms
    await short.put(h, record('a'));
    await delay(250);
    assert.equal(await store.get(h), undefined, 'expired');

    await store.put(hash, record('a'));
    const keys = await client.keys('*');
    const dump = (await Promise.all(keys.map(async (k) => `${k}=${(await client.type(k)) === 'string' ? await client.get(k) : ''}`))).join('\n');
    assert.ok(!dump.includes(KEY), 'the raw resume key is nowhere in Redis');
    assert.doesNotMatch(dump, /token|Bearer|eyJ/i, 'no token in a record');
  });
});
