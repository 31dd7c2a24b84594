// The dashboard's credits across a rolling update, with a real Prometheus scraping two real gateway
// processes that share a real redis-server: one replica drains and hands its session over (its first
// segment's credits are recorded as it exits, after its last scrape, so a per-replica counter loses
// them), then a new pod takes its place. The credits the dashboard's own panel query shows for the
// range equal the usage API's total for the tenant over the hours the range's sessions started in.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { replicaUrl, resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { metricsTarget } from '../support/metrics.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, type TestClient } from '../support/stack.js';
import { ledgerSessionsAt, usageTotalAt, type LedgerSession } from '../support/usage-api.js';
import { delay } from '../support/wait.js';
import { panelQuery } from './dashboard.js';
import { startPrometheus, type TestPrometheus } from './prom-server.js';

const JOB = 'speech-gateway';
const TOKEN = 'rolling-credits-token';
const TENANT = 'rolling-credits';
const HOUR = 3_600_000;
const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

/** A session of TENANT on replica i (resumable with `key`), its config accepted. */
async function session(cluster: Cluster, i: number, key = newResumeKey()): Promise<TestClient> {
  const c = await openClient(await replicaUrl(cluster, i, TENANT, key));
  c.sendJson({ type: 'config', configuration });
  await c.next('CONFIG_ACCEPTED', 15_000);
  return c;
}

async function send(c: TestClient, from: number, to: number): Promise<void> {
  for (const piece of pieces.slice(from, to)) {
    c.send(piece);
    await delay(100);
  }
}

async function end(c: TestClient): Promise<void> {
  c.sendJson({ type: 'end' });
  await c.next('ended', 30_000);
  assert.equal((await c.closed).code, 1000);
}

/** The ledger's sessions of TENANT once `count` are there and all ended. */
async function endedSessions(port: number, count: number): Promise<LedgerSession[]> {
  let rows = await ledgerSessionsAt(port, TOKEN, TENANT);
  for (let k = 0; k < 200 && (rows.length < count || rows.some((r) => r.end === null)); k++)
    rows = await delay(100).then(() => ledgerSessionsAt(port, TOKEN, TENANT));
  return rows;
}

describe('dashboard credits equal the usage API across a rolling update (two replicas, Redis, Prometheus)', () => {
  let cluster: Cluster;
  let prom: TestPrometheus;
  beforeAll(async () => {
    cluster = await startCluster(2, { USAGE_API_TOKEN: TOKEN, DRAIN_SECONDS: '20', RESUME_GRACE_SECONDS: '10' });
    const targets = cluster.replicas.map((r) => metricsTarget(r.adminPort));
    prom = await startPrometheus({ job: JOB, targets });
  }, 60_000);
  afterAll(async () => {
    await prom?.stop();
    await cluster?.close();
  });

  it("a drained replica's handed-over session and the new pod's session: the panel shows the API's total", async () => {
    const from = Date.now();
    await prom.scrapedAfter(JOB, from); // the range starts with both replicas scraped, no credits yet

    // One session on each replica; replica 0's is handed over when it drains.
    const key = newResumeKey();
    const handed = await session(cluster, 0, key);
    const stays = await session(cluster, 1);
    await Promise.all([send(handed, 0, 14), send(stays, 0, 14)]);
    await handed.next('transcript', 10_000);
    const exit = cluster.stop(0);
    assert.equal((await handed.closed).code, 1012);
    const resumed = await session(cluster, 1, key);
    const accepted = resumed.messages.find((m) => m.type === 'CONFIG_ACCEPTED')!;
    assert.equal(accepted.resumed, true, 'the session went on on replica 1');
    const audioBytes = accepted.audioBytes as number;
    await Promise.all([resendFrom(resumed, stream, audioBytes), send(stays, 14, pieces.length)]);
    assert.equal(await exit, 0, cluster.replicas[0].output().slice(-3000));

    // The new pod takes replica 0's place and serves a session of its own.
    await cluster.start(0);
    const fresh = await session(cluster, 0);
    await send(fresh, 0, 10);
    await Promise.all([end(resumed), end(stays), end(fresh)]);

    const rows = await endedSessions(cluster.replicas[1].adminPort, 3);
    assert.equal(rows.length, 3, 'three ledger sessions');
    assert.deepEqual(
      rows.map((r) => r.segments.length).sort(),
      [1, 1, 2],
      `the handed-over one has two upstream segments; the ledger's rows: ${JSON.stringify(rows)}`,
    );
    await prom.scrapedAfter(JOB, Date.now()); // both replicas scraped after the ledger's last write
    const to = Date.now();

    const api = await usageTotalAt(cluster.replicas[1].adminPort, TOKEN, {
      tenant: TENANT,
      from: from - (from % HOUR),
      to: to - (to % HOUR) + HOUR,
    });
    const expr = panelQuery('Credits per tenant')
      .replaceAll('$__range', `${Math.ceil((to - from) / 1000) + 1}s`)
      .replaceAll('$instance', '.*')
      .replaceAll('$tenant', TENANT);
    const shown = await prom.query(expr, to);
    assert.ok(api > 0, `the usage API has the tenant's credits (${api})`);
    assert.equal(shown.length, 1, `one figure for the tenant: ${JSON.stringify(shown)}`);
    assert.ok(Math.abs(Number(shown[0].value[1]) - api) < 1e-9, `panel ${shown[0].value[1]}, usage API ${api}`);
  }, 120_000);
});
