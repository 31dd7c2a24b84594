// What a session record leaves in Redis: after a SIGTERM handover the record carries what the client
// missed (transcripts), the open WebM Cluster's head (audio bytes), the client's config and its
// container headers; a dump of every Redis key then must hold none of it in clear (nor base64 of it),
// while the client that resumes with its key still gets all of it.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { replicaUrl, resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const NAME = 'Zebediah Quackenbush';
const configuration = {
  primaryLanguage: 'en',
  audioFormat: 'audio/webm;codecs=opus',
  replacements: [{ find: 'zeb', replace: NAME }],
};
/** A byte run of the client's audio this long found anywhere in the dump counts as audio at rest. */
const RUN = 12;

/** Every key and its value: strings as they are, other types as DUMP's serialisation. */
async function dumpRedis(url: string): Promise<Array<{ key: string; value: Buffer }>> {
  const redis = new Redis(url);
  try {
    const out: Array<{ key: string; value: Buffer }> = [];
    for (const key of await redis.keys('*')) {
      const value = (await redis.type(key)) === 'string' ? await redis.getBuffer(key) : await redis.dumpBuffer(key);
      if (value) out.push({ key, value });
    }
    return out;
  } finally {
    redis.disconnect();
  }
}

/** The value, and every JSON string in it decoded as base64 (how a record would carry bytes). */
function readings(value: Buffer): Buffer[] {
  const out = [value];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.push(Buffer.from(v, 'base64'));
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  try {
    walk(JSON.parse(value.toString()));
  } catch {
    // not JSON: the value as it is
  }
  return out;
}

/** Whether `b` holds any RUN-byte run of the client's audio. */
function holdsAudio(b: Buffer, runs: Set<string>): boolean {
  for (let i = 0; i + RUN <= b.length; i++) if (runs.has(b.toString('latin1', i, i + RUN))) return true;
  return false;
}

describe('a session record at rest in Redis', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { DRAIN_SECONDS: '20', RESUME_GRACE_SECONDS: '20' });
  }, 60_000);
  afterAll(() => cluster?.close());

  it('after a SIGTERM handover: no transcript, audio byte run or config content in clear; the resumed client gets them all', async () => {
    const tenant = 'at-rest';
    const key = newResumeKey();
    const first = await openClient(await replicaUrl(cluster, 0, tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, 14)) {
      first.send(piece);
      await delay(100);
    }
    await first.next('transcript', 10_000);
    const exit = cluster.stop(0);
    assert.match((await first.closed).reason, /handed over/);
    assert.equal(await exit, 0, cluster.replicas[0].output().slice(-3000));

    const dump = await dumpRedis(cluster.redis.url);
    const records = dump.filter((d) => d.key.startsWith('sgw:rec:'));
    assert.equal(records.length, 1, `one session record (${dump.map((d) => d.key)})`);
    assert.match(records[0].value.toString(), /"state":"handed_over"/);

    // The client resumes on the other replica: it gets what it missed, which the record carried.
    const second = await openClient(await replicaUrl(cluster, 1, tenant, key));
    second.sendJson({ type: 'config', configuration });
    const accepted = await second.next('CONFIG_ACCEPTED', 20_000);
    assert.equal(accepted.resumed, true);
    await delay(300);
    const missed = second.messages.filter((m) => m.type === 'transcript');
    assert.ok(missed.length > 0, 'the record carried transcripts the client missed');
    await resendFrom(second, stream, accepted.audioBytes);
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);

    const texts = [...new Set(finals([...first.messages, ...second.messages]).map((f) => f.text))];
    const runs = new Set<string>();
    for (let i = 0; i + RUN <= stream.length; i++) {
      const run = stream.subarray(i, i + RUN);
      if (new Set(run).size >= RUN / 2) runs.add(run.toString('latin1')); // not padding-like runs any data may hold
    }
    for (const { key: k, value } of dump) {
      const clear = value.toString('latin1');
      for (const t of texts) assert.ok(!clear.includes(t), `${k} holds the transcript "${t}" in clear`);
      assert.ok(
        !clear.includes('[emulator]') && !clear.includes('"transcript"'),
        `${k} holds transcript messages in clear`,
      );
      assert.ok(!clear.includes(NAME) && !clear.includes('primaryLanguage'), `${k} holds the client's config in clear`);
      assert.ok(
        !readings(value).some((b) => holdsAudio(b, runs)),
        `${k} holds a ${RUN}-byte run of the client's audio (or its container headers)`,
      );
    }
    await cluster.start(0);
  }, 120_000);
});
