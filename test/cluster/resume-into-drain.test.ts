// A resume that reaches a replica in the moment its drain begins: the upgrade's lookup has claimed the
// session's record for this replica (a takeover), then the socket opens into the drain. The vendor
// SDK sends the audio it queued while reconnecting as the socket opens and never sends it again, so
// the replica must take that audio and hand the session on, not close the socket at once (the audio
// lost, and the record left naming a draining replica as the session's live owner). Three real
// gateway processes share one redis-server and one emulator; replica 1 reaches Redis through a proxy
// that delays its replies, which holds its lookup open while the test sends it SIGTERM.
import assert from 'node:assert/strict';
import type net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { endpointPath, openClient, type TestClient } from '../support/stack.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
/** Each Redis reply to replica 1 comes this late: its resume lookup (a read, then the claim) takes twice that. */
const REDIS_DELAY_MS = 1000;

/** The `event` names in a replica's JSON log, in order. */
const logEvents = (output: string) => [...output.matchAll(/"event":"([a-z_]+)"/g)].map((m) => m[1]).join(' ');

describe('a resume that opens as its replica starts draining', () => {
  let cluster: Cluster;
  let redisProxy: TcpProxy;
  beforeAll(async () => {
    redisProxy = await startTcpProxy(() => Number(new URL(cluster.redis.url).port));
    const viaProxy = { REDIS_URL: `redis://127.0.0.1:${redisProxy.port}` };
    cluster = await startCluster(3, { DRAIN_SECONDS: '20', RESUME_GRACE_SECONDS: '10' }, (i) =>
      i === 1 && cluster ? viaProxy : {},
    );
    // The replicas started before `cluster` was set (the proxy needs its Redis): replica 1 goes again, through it.
    await cluster.stop(1);
    await cluster.start(1);
  });
  afterEach(() => {
    cluster.emulator.faults.stall = false;
    redisProxy.delayReplies(0);
  });
  afterAll(async () => {
    await cluster?.close();
    await redisProxy?.close();
  });

  const url = (i: number, token: string, tenant: string, key?: string) =>
    `ws://127.0.0.1:${cluster.replicas[i].port}${endpointPath('transcribe')}?tenant-name=${tenant}` +
    `${key ? `&resume=${key}` : ''}&token=${encodeURIComponent(`Bearer ${token}`)}`;

  /** As the SDK does on a reconnection: the pieces it queued, then its config, in one write as the
   *  socket opens (`lateMs` later: a far client's first bytes); a refused upgrade is tried again a
   *  second later, for up to 30 s. */
  const reconnect = async (at: () => Promise<string>, queued: Buffer[], lateMs = 0): Promise<TestClient> => {
    let c: TestClient | undefined;
    for (let tries = 0; !c; tries++) {
      c = await openClient(await at()).catch((err: Error) => {
        if (tries === 30) throw err;
        return delay(1000).then(() => undefined);
      });
    }
    if (lateMs) await delay(lateMs);
    const socket = (c.ws as unknown as { _socket: net.Socket })._socket;
    socket.cork();
    for (const piece of queued) c.send(piece);
    c.sendJson({ type: 'config', configuration });
    process.nextTick(() => socket.uncork());
    return c;
  };

  /** A session handed over by replica 0 resumes, sending three pieces as it opens, on a replica that
   *  drains: `racing`, replica 1 as it starts draining (its lookup held open by the Redis proxy);
   *  `slow`, the same while replica 0's handover waits for the upstream, so replica 1's lookup finds it
   *  under way and its socket waits for it; `same`, replica 0 itself, still draining (a balancer that
   *  has not taken it out yet). Then on replica 2 with the rest. */
  const throughDrainingReplica = async (tenant: string, mode: 'racing' | 'slow' | 'same') => {
    await cluster.allUp();
    const key = newResumeKey();
    const token = () => cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const resumedOn = mode === 'same' ? 0 : 1;

    // That replica has a session of its own, which keeps its drain going while the resume arrives.
    const holder = await openClient(url(resumedOn, await token(), tenant));
    holder.sendJson({ type: 'config', configuration });
    await holder.next('CONFIG_ACCEPTED');

    // The session streams on replica 0, which is then stopped: it is handed over.
    const first = await openClient(url(0, await token(), tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, 12)) {
      first.send(piece);
      await delay(100);
    }
    await first.next('transcript', 10_000);
    cluster.emulator.faults.stall = mode === 'slow'; // the upstream's answer to the handover's `end` waits
    const exit0 = cluster.stop(0);
    assert.match((await first.closed).reason, /handed over/);

    // The resume goes to replica 1, which gets SIGTERM while its lookup waits for Redis (or to replica 0).
    const resumeToken = await token();
    if (mode !== 'same') {
      redisProxy.delayReplies(REDIS_DELAY_MS);
      setTimeout(() => void cluster.stop(1), REDIS_DELAY_MS / 2);
    }
    // On replica 0 its frames come once the handover there has begun: the config is answered, and what
    // the session kept for the client stays kept for the replica it goes to next.
    const lateMs = mode === 'same' ? 300 : 0;
    const second = await reconnect(async () => url(resumedOn, resumeToken, tenant, key), pieces.slice(12, 15), lateMs);
    if (mode === 'slow') await delay(1500).then(() => (cluster.emulator.faults.stall = false));
    const closed = await second.closed;
    assert.equal(closed.code, 1012);
    const events = logEvents(cluster.replicas[resumedOn].output()).split(' ');
    assert.ok(
      events.indexOf('drain_start') < events.lastIndexOf('upgrade_accepted'), // the resume's
      `the drain began before the socket opened (replica ${resumedOn}: ${events.join(' ')})`,
    );
    holder.sendJson({ type: 'end' }); // that replica's drain may finish now

    // The SDK reconnects again, elsewhere, and goes on with the pieces after those it sent.
    const third = await reconnect(async () => url(2, await token(), tenant, key), []);
    const accepted = await third.next('CONFIG_ACCEPTED', 35_000);
    const sent = pieces.slice(0, 15).reduce((n, p) => n + p.length, 0);
    const said = `replica ${resumedOn} closed it "${closed.reason}" and said ${events.join(' ')}`;
    assert.equal(accepted.audioBytes, sent, `the audio sent as it opened was taken (${said})`);
    for (const piece of pieces.slice(15)) {
      third.send(piece);
      await delay(100);
    }
    third.sendJson({ type: 'end' });
    await third.next('ended', 30_000);
    const f = finals([...first.messages, ...second.messages, ...third.messages]);
    for (let i = 1; i < f.length; i++)
      assert.ok(Math.abs(f[i].start - f[i - 1].end) < 0.01, `final ${i} (${f[i].start}) follows ${f[i - 1].end}`);
    assert.ok(f.at(-1)!.end > 8.5, `the finals cover the audio (last ends at ${f.at(-1)!.end})`);
    assert.equal(await exit0, 0);
  };

  it('its record claimed before the drain: it takes the audio the client sends as it opens and hands the session on', async () => {
    await throughDrainingReplica('resume-into-drain', 'racing');
  });

  it('its record still being handed over: the socket waits for it through the drain, then takes the audio and hands the session on', async () => {
    await throughDrainingReplica('resume-into-drain-wait', 'slow');
  });

  it('to the draining replica that handed it over: it takes the session back with that audio and hands it on again', async () => {
    await throughDrainingReplica('resume-into-drain-same', 'same');
  });
});
