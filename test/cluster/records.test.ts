// Session records in a real redis-server: ownership changes are compare-and-set (one of two
// racing replicas wins), records expire, the janitor gets a handed-over record once, and neither
// the raw resume key nor a token is ever stored.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { clusterKeys } from '../../src/cluster/authenticity.js';
import { createRecordStore, recordKeyHash, type RecordStore, type SealedRecord } from '../../src/cluster/records.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const KEY = 'resume-key-0123456789abcdefXYZ';

function record(owner: string, state: SealedRecord['state'] = 'live'): SealedRecord {
  return {
    v: 3,
    owner,
    ownerUrl: `ws://${owner}`,
    state,
    tenant: 'acme',
    endpoint: 'transcribe',
    sessionKey: 'sk-1',
    sealed: 'c2VhbGVk',
    timeline: { kind: 'webm', offset: 0, finalUntil: 1.5, mediaReceived: 3, audioBytes: 1200, segment: 0, seq: 4 },
    updatedAt: Date.now(),
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
    assert.equal(await store.put(hash, record('b')), false, "another replica cannot overwrite the owner's record");
    assert.equal((await store.get(hash))?.owner, 'a');

    assert.equal(await store.claim(hash, { owner: 'a', state: 'handed_over' }, record('b')), false, 'state differs');
    await store.put(hash, record('a', 'handed_over'), Date.now() + 60_000);
    const racing = await Promise.all(
      ['b', 'c'].map((r) => store.claim(hash, { owner: 'a', state: 'handed_over' }, record(r))),
    );
    assert.deepEqual(racing.sort(), [false, true], 'two replicas race: exactly one takes it over');
    const now = await store.get(hash);
    assert.ok(now && ['b', 'c'].includes(now.owner) && now.state === 'live');
    assert.deepEqual(await store.reap(Date.now() + 120_000), [], "a claimed record is not the janitor's any more");

    await store.remove(hash, 'a');
    assert.ok(await store.get(hash), 'a former owner cannot delete it');
    await store.remove(hash, now.owner);
    assert.equal(await store.get(hash), undefined);
  });

  it('a new session claims its key once; a bare claim is replaced only as the one of the owner named, and never replaces a record with a timeline', async () => {
    const h = recordKeyHash(`${KEY}-claim`);
    const bare = (owner: string): SealedRecord => ({ ...record(owner), timeline: undefined });
    const racing = await Promise.all(['a', 'b'].map((o) => store.claimKey(h, bare(o))));
    assert.deepEqual(racing.sort(), [false, true], 'two replicas claim one new key at once: exactly one gets it');
    const holder = (await store.get(h))!.owner;
    const other = holder === 'a' ? 'b' : 'a';
    assert.equal(await store.claimKey(h, bare(other), other), false, 'a claim names the owner it replaces');
    assert.equal(
      await store.claimKey(h, bare(other), holder),
      true,
      "that owner's bare claim (dead, or not holding it) is replaced",
    );
    assert.equal(await store.put(h, record(other)), true, 'its owner writes the timeline once there is one');
    assert.equal(await store.put(h, bare(other)), true);
    assert.ok((await store.get(h))!.timeline, 'a bare claim only keeps a record with a timeline alive');
    assert.equal(await store.claimKey(h, bare(holder), other), false, 'a record with a timeline is not a bare claim');
    await store.remove(h, other);
  });

  it('a value without this version, or of the release before once its window is over, is not a record: not read, counted', async () => {
    const h = recordKeyHash(`${KEY}-v1`);
    const rejected: string[] = [];
    const until = Date.now() + 60_000;
    const at = (now: number) =>
      createRecordStore({
        redis: client,
        graceSeconds: 0,
        legacyUntil: until,
        now: () => now,
        rejected: (w) => rejected.push(w),
      });
    // What an older gateway wrote (version 1, its content in clear), or a forgery of one: never read.
    const v1 = {
      v: 1,
      owner: 'a',
      ownerUrl: 'ws://a',
      state: 'handed_over',
      tenant: 'acme',
      subject: 'user-1',
      endpoint: 'transcribe',
      sessionKey: 'sk-1',
      kind: 'webm',
      offset: 0,
      finalUntil: 1.5,
      missed: ['{"type":"transcript","data":{"text":"discontinue warfarin","isFinal":true}}'],
      updatedAt: 1,
    };
    for (const forged of [v1, { ...v1, v: undefined }, { ...record('a', 'handed_over'), v: 4 }]) {
      await client.set(`sgw:rec:${h}`, JSON.stringify(forged), 'PX', 10_000);
      assert.equal(await at(Date.now()).get(h), undefined, JSON.stringify(forged.v));
    }
    // The release before's (version 2) is read while a rolling update from it may be under way, only.
    await client.set(`sgw:rec:${h}`, JSON.stringify({ ...record('a'), v: 2 }), 'PX', 10_000);
    assert.equal((await at(until - 1).get(h))?.owner, 'a', 'version 2 within LEGACY_RECORDS_UNTIL');
    assert.equal(await at(until).get(h), undefined, 'and not after it');
    assert.deepEqual(rejected, ['legacy', 'legacy', 'legacy', 'legacy']);
    await client.del(`sgw:rec:${h}`);
  });

  it("with CLUSTER_SECRET's keys, a record whose MAC is missing or wrong is not read, whatever it says", async () => {
    const h = recordKeyHash(`${KEY}-mac`);
    const rejected: string[] = [];
    const keys = clusterKeys('a-cluster-secret-of-at-least-32-characters')!;
    const signed = createRecordStore({ redis: client, graceSeconds: 0, keys, rejected: (w) => rejected.push(w) });
    assert.equal(await signed.put(h, record('a')), true);
    const stored = (await client.get(`sgw:rec:${h}`))!;
    assert.match(stored, /,"mac":"[0-9a-f]{64}"}$/);
    assert.equal((await signed.get(h))?.owner, 'a');
    const other = createRecordStore({ redis: client, graceSeconds: 0, keys: clusterKeys('x'.repeat(40)) });
    assert.equal(await other.get(h), undefined, "another secret's replica does not read it");
    // A Redis writer moves the owner's address (or anything else), keeping the old MAC, or dropping it.
    for (const forged of [stored.replace('ws://a', 'ws://evil.example'), JSON.stringify(record('a'))]) {
      await client.set(`sgw:rec:${h}`, forged, 'PX', 10_000);
      assert.equal(await signed.get(h), undefined, forged.slice(0, 60));
      assert.deepEqual(await signed.getMany([h]), [undefined]);
    }
    await client.set(`sgw:rec:${h}`, stored.replace('"state":"live"', '"state":"handed_over"'), 'PX', 10_000);
    await client.zadd('sgw:rec-deadlines', 0, h);
    assert.deepEqual(await signed.reap(Date.now()), [], 'the janitor does not act on a forged handed-over record');
    assert.ok(rejected.every((w) => w === 'unauthenticated') && rejected.length === 5, rejected.join());
    await client.del(`sgw:rec:${h}`);
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
    const dump = (
      await Promise.all(keys.map(async (k) => `${k}=${(await client.type(k)) === 'string' ? await client.get(k) : ''}`))
    ).join('\n');
    assert.ok(!dump.includes(KEY), 'the raw resume key is nowhere in Redis');
    assert.doesNotMatch(dump, /token|Bearer|eyJ/i, 'no token in a record');
  });
});
