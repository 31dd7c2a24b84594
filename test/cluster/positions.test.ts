// A replica's session positions in a real redis-server: what many sessions report in one moment is
// one HSET, a position not written while Redis is away is written once it is back, a session that
// leaves takes its field with it, and a position Redis hands back that this code did not write is
// not used.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { decodePosition, encodePosition, Positions } from '../../src/cluster/positions.js';
import { createRecordStore, recordKeyHash, type RecordStore, type RecordTimeline } from '../../src/cluster/records.js';
import { logger } from '../../src/telemetry/index.js';
import { delay, until } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const timeline: RecordTimeline = {
  kind: 'webm',
  offset: 0,
  finalUntil: 1.5,
  mediaReceived: 3.0000004,
  audioBytes: 1200,
  segment: 0,
  seq: 4,
};

async function hsets(client: Redis): Promise<number> {
  const m = /cmdstat_hset:calls=(\d+)/.exec(await client.info('commandstats'));
  return Number(m?.[1] ?? 0);
}

describe('session positions', () => {
  let redis: TestRedis;
  let client: Redis;
  let store: RecordStore;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
    client.on('error', () => undefined);
    await client.connect();
    store = createRecordStore({ redis: client, graceSeconds: 0 });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it('the finals of 50 sessions in one moment are one HSET; a session that leaves takes its field', async () => {
    const positions = new Positions(store, () => 'replica-a', logger, 10_000);
    const hashes = Array.from({ length: 50 }, (_, i) => recordKeyHash(`key-${i}`));
    const untrack = hashes.map((h) => positions.track(h, () => undefined));
    const before = await hsets(client);
    for (const h of hashes) positions.set(h, encodePosition(timeline, Date.now()), true);
    await until(async () => (await client.hlen('sgw:pos:replica-a')) === 50, 'the positions written', {
      withinMs: 2000,
      everyMs: 20,
    });
    assert.equal((await hsets(client)) - before, 1, 'one HSET for the 50');
    assert.ok((await client.pttl('sgw:pos:replica-a')) > 0, 'the hash expires unless renewed');
    const back = decodePosition((await store.position('replica-a', hashes[7]))!, { ...timeline, finalUntil: 0 });
    assert.equal(back?.timeline.finalUntil, 1.5);
    assert.equal(back?.timeline.mediaReceived, 3, 'media received to the microsecond');

    for (const u of untrack.slice(0, 10)) u();
    await until(async () => (await client.hlen('sgw:pos:replica-a')) === 40, 'the fields of those that left deleted', {
      withinMs: 3000,
      everyMs: 50,
    });
    positions.close();
  });

  it('a position not written while Redis is away is written once it is back', async () => {
    const positions = new Positions(store, () => 'replica-b', logger, 10_000);
    const h = recordKeyHash('key-away');
    positions.track(h, () => undefined);
    await redis.stop();
    positions.set(h, encodePosition(timeline, 1), true);
    await delay(300);
    positions.set(h, encodePosition({ ...timeline, finalUntil: 2.5 }, 2), false);
    await redis.restart();
    await until(async () => (await store.position('replica-b', h).catch(() => undefined)) !== undefined, 'written', {
      withinMs: 5000,
      everyMs: 100,
    });
    assert.equal(
      decodePosition((await store.position('replica-b', h))!, timeline)?.timeline.finalUntil,
      2.5,
      'the newest',
    );
    positions.close();
  });

  it('a position that is not one this code wrote is not used', () => {
    for (const bad of [
      'not json',
      '{}',
      '[1,2,3]',
      JSON.stringify([1, 0, 1.5, 3, 1200, 0.5, 4, null, null, null, null]), // a fractional segment
      JSON.stringify([1, 0, -1, 3, 1200, 0, 4, null, null, null, null]), // a negative time
      JSON.stringify([1, 0, 1.5, 3, 1200, 0, 4, 'x', null, null, null]),
      '[1,0,1e400,3,1200,0,4,null,null,null,null]', // parses as Infinity
    ])
      assert.equal(decodePosition(bad, timeline), undefined, bad);
    assert.deepEqual(decodePosition(encodePosition(timeline, 5), timeline), {
      at: 5,
      timeline: { ...timeline, mediaReceived: 3, credits: undefined, resume: undefined },
    });
  });

  it("the owner's check: a record written over with garbage reads as gone; a session failing its check does not stop the others", async () => {
    const positions = new Positions(store, () => 'replica-c', logger, 10_000);
    const [a, b] = ['key-garbage', 'key-other'].map(recordKeyHash);
    await client.set(`sgw:rec:${a}`, '{not json', 'PX', 60_000);
    const seen: Array<[string, unknown]> = [];
    positions.track(a, (r) => {
      seen.push(['a', r]);
      throw new Error('this session fails');
    });
    positions.track(b, (r) => void seen.push(['b', r]));
    await until(async () => seen.length >= 2, 'the check', { withinMs: 6000, everyMs: 100 });
    assert.deepEqual(seen.slice(0, 2), [
      ['a', undefined],
      ['b', undefined],
    ]);
    positions.close();
  });
});
