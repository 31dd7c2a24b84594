// Clients that resend from the `audioBytes` they are given lose nothing when their session changes
// replica, with three real gateway processes sharing one redis-server and one emulator:
// - the owner is SIGKILLed mid-dictation: each client comes back on another replica, which reports a
//   count the session can go on from (the start of the oldest Cluster the finals do not cover whole),
//   so with 5 s Clusters (ffmpeg's WebM) the finals still cover the whole timeline without a gap and
//   no media is counted lost;
// - the owner is drained (SIGTERM, a handover): the client's final `usage` is the session's over both
//   upstream sessions, as the ledger has it, not the last upstream session's.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { run } from '../audio-transcode/ogg-check.js';
import { resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks, FIXTURES } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { metric } from '../support/metrics.js';
import { endpointPath, openClient, type TestClient } from '../support/stack.js';
import { finals, type Final } from '../support/transcripts.js';
import { ledgerSessionsAt } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const API_TOKEN = 'resend-usage-token';
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
/** The longest Opus packet of these streams: a seam may overlap by less. */
const PACKET = 0.06;

/** One timeline with nothing missing: each final starts where the one before ended (less than a packet before it, never after). */
function assertWhole(f: Final[], until: number, label: string): void {
  assert.ok(f.length > 5, `${label}: finals arrived (${f.length})`);
  assert.ok(f[0].start < 0.01, `${label}: from 0`);
  for (let i = 1; i < f.length; i++) {
    const overlap = f[i - 1].end - f[i].start;
    assert.ok(
      f[i].end > f[i - 1].end && overlap <= PACKET + 1e-6 && overlap >= -0.01,
      `${label}: final ${i} (${f[i].start}-${f[i].end}) after final ${i - 1} (${f[i - 1].start}-${f[i - 1].end}): ${overlap < 0 ? `a gap of ${(-overlap).toFixed(3)} s` : `an overlap of ${overlap.toFixed(3)} s`}`,
    );
  }
  assert.ok(f.at(-1)!.end > until, `${label}: the finals cover the audio (last ends at ${f.at(-1)!.end})`);
}

/** The ledger's sessions of `tenant` once every one has ended. */
async function endedSessions(port: number, tenant: string) {
  let rows = await ledgerSessionsAt(port, API_TOKEN, tenant);
  for (let k = 0; k < 200 && (rows.length === 0 || rows.some((r) => r.end === null)); k++)
    rows = await delay(100).then(() => ledgerSessionsAt(port, API_TOKEN, tenant));
  return rows;
}

describe('clients that resend from audioBytes, across replicas', () => {
  let cluster: Cluster;
  let dir: string;
  let webm5s: Buffer;
  beforeAll(async () => {
    cluster = await startCluster(3, {
      USAGE_API_TOKEN: API_TOKEN,
      PACE: '4',
      DRAIN_SECONDS: '20',
      RESUME_GRACE_SECONDS: '10',
    });
    dir = await mkdtemp(join(tmpdir(), 'resend-'));
    const file = join(dir, 'clusters-5s.webm');
    await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-i',
      join(FIXTURES, 'dictation.ogg'),
      '-c:a',
      'copy',
      '-f',
      'webm',
      '-cluster_time_limit',
      '5000',
      '-cluster_size_limit',
      '10000000',
      file,
    ]);
    webm5s = await readFile(file);
  });
  afterAll(async () => {
    await cluster?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const url = async (i: number, tenant: string, key: string) =>
    `ws://127.0.0.1:${cluster.replicas[i].port}${endpointPath('transcribe')}?tenant-name=${tenant}&resume=${key}` +
    `&token=${encodeURIComponent(`Bearer ${await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' })}`)}`;

  /** A resumable session on replica `i` that has sent `stream` up to `upTo` bytes (2000 every 150 ms: 4× real time). */
  async function dictating(i: number, tenant: string, key: string, stream: Buffer, upTo: number): Promise<TestClient> {
    const c = await openClient(await url(i, tenant, key));
    c.sendJson({ type: 'config', configuration });
    await c.next('CONFIG_ACCEPTED');
    for (let at = 0; at < upTo; at += 2000) {
      c.send(stream.subarray(at, Math.min(at + 2000, upTo)));
      await delay(150);
    }
    return c;
  }

  /** The client back on replica `i` with its key: it resends from the count it is given, then ends. */
  async function resumeAndFinish(i: number, tenant: string, key: string, stream: Buffer): Promise<TestClient> {
    const c = await openClient(await url(i, tenant, key));
    c.sendJson({ type: 'config', configuration });
    const accepted = await c.next('CONFIG_ACCEPTED', 30_000);
    assert.equal(accepted.resumed, true);
    assert.ok(accepted.audioBytes > 0 && accepted.audioBytes <= stream.length, `audioBytes ${accepted.audioBytes}`);
    await resendFrom(c, stream, accepted.audioBytes);
    c.sendJson({ type: 'end' });
    await c.next('ended', 30_000);
    return c;
  }

  it("after a handover, the client's final usage is the session's over both upstream sessions, as the ledger has it", async () => {
    const tenant = 'resend-handover';
    const key = newResumeKey();
    const stream = Buffer.concat(chromeChunks('webm-opus'));
    const first = await dictating(0, tenant, key, stream, 30_000);
    first.sendJson({ type: 'flush' });
    await first.next('delta_usage', 10_000);
    const exit = cluster.stop(0);
    let second: TestClient;
    try {
      assert.match((await first.closed).reason, /handed over/);
      second = await resumeAndFinish(1, tenant, key, stream);
      assert.equal(await exit, 0);
    } finally {
      await exit;
      await cluster.start(0);
    }

    const usage = second.messages.filter((m) => m.type === 'usage');
    assert.equal(usage.length, 1);
    const rows = await endedSessions(cluster.replicas[1].adminPort, tenant);
    assert.equal(rows.length, 1, 'one ledger session');
    assert.equal(rows[0].segments.length, 2, 'two upstream segments');
    assert.ok(rows[0].segments.every((s) => s.credits > 0));
    assert.ok(
      Math.abs(usage[0].credits - rows[0].credits) < 1e-6,
      `the client was told ${usage[0].credits}, the ledger has ${rows[0].credits} (${rows[0].segments.map((s) => s.credits).join(' + ')})`,
    );
  });

  it('the owner SIGKILLed mid-dictation with 5 s Clusters: every resending client loses nothing', async () => {
    const sessions = [0, 1, 2].map((k) => ({
      tenant: `resend-crash-${k}`,
      key: newResumeKey(),
      upTo: 24_000 + k * 7000,
    }));
    const firsts = await Promise.all(sessions.map((s) => dictating(0, s.tenant, s.key, webm5s, s.upTo)));
    await Promise.all(firsts.map((c) => c.next('transcript', 10_000)));
    await delay(2500); // the records' refresh
    await cluster.kill(0);
    let seconds: TestClient[];
    try {
      seconds = await Promise.all(sessions.map((s, k) => resumeAndFinish(1 + (k % 2), s.tenant, s.key, webm5s)));
    } finally {
      await cluster.start(0);
    }

    for (const [k, s] of sessions.entries()) {
      const all = [...firsts[k].messages, ...seconds[k].messages];
      assert.deepEqual(
        all.filter((m) => m.type === 'error'),
        [],
        `${s.tenant}: no error`,
      );
      assertWhole(finals(all), 25.5, s.tenant);
    }
    const ports = [1, 2].map((i) => cluster.replicas[i].adminPort);
    const takeovers = await Promise.all(ports.map((p) => metric(p, 'speech_gateway_takeovers_total{from="crash"}')));
    assert.equal(takeovers[0] + takeovers[1], sessions.length, 'each session taken over after the crash');
    const lost = await Promise.all(ports.map((p) => metric(p, 'speech_gateway_takeover_lost_media_seconds_total')));
    assert.deepEqual(lost, [0, 0], 'no media counted lost');
  });
});
