// Two connections with one new resume key and one token, one on each of two real gateway processes
// sharing a real redis-server, opened at once (two browser tabs sharing a stored key): the key is
// claimed before a socket is accepted, so one of them gets the session and the other a clear
// refusal (or an answer on its socket); whatever session was opened ends with its usage recorded:
// the ledger holds one session per upstream session, each ended with credits.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient, resumeUrl, startStack, type Stack } from '../support/stack.js';
import { ledgerSessionsAt, type LedgerSession } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const API_TOKEN = 'key-race-usage-token';
const pieces = chromeChunks('webm-opus').slice(0, 10); // 3 s of live Chromium WebM/Opus
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const ROUNDS = 6;

/** How one connection went: refused at the upgrade (status and error id), or its socket's messages and close. */
type Outcome = { refused: number; errorId?: string } | { types: string[]; close: { code: number; reason: string } };

/** Opens a session, streams 3 s (slower than the record's 2 s refresh), ends it, and reads until the close. */
async function tab(url: string): Promise<Outcome> {
  let client;
  try {
    client = await openClient(url);
  } catch (err) {
    const e = err as { status?: number; body?: string };
    if (!e.status) throw err;
    return { refused: e.status, errorId: (JSON.parse(e.body || '{}') as { error?: { id?: string } }).error?.id };
  }
  client.sendJson({ type: 'config', configuration });
  await client.next('CONFIG_ACCEPTED').catch(() => undefined);
  for (const piece of pieces) {
    if (client.ws.readyState !== client.ws.OPEN) break;
    client.send(piece);
    await delay(300);
  }
  if (client.ws.readyState === client.ws.OPEN) client.sendJson({ type: 'end' });
  const close = await Promise.race([
    client.closed,
    delay(30_000).then(() => ({ code: -1, reason: 'not closed within 30 s' })),
  ]);
  return { types: client.types(), close };
}

/** Told: refused with a catalogue error, ended normally after its end message, sent an error before
 *  its close, or (one replica, the other connection came second and resumed the session) closed 4409
 *  as replaced by the newer connection, which goes on with the session. */
function answered(o: Outcome): boolean {
  if ('refused' in o) return o.refused >= 400 && o.errorId !== undefined;
  return (
    (o.close.code === 1000 && o.types.includes('ended')) ||
    o.types.includes('error') ||
    (o.close.code === 4409 && /newer connection/.test(o.close.reason))
  );
}

/** The ledger once every session of `tenant` ended, checked against the upstream sessions: one ledger
 *  session per upstream session (its segments), each ended with credits. */
async function assertLedger(
  port: number,
  tenant: string,
  upstream: Array<{ sessionId?: string }>,
  rounds: number,
): Promise<LedgerSession[]> {
  let rows: LedgerSession[] = [];
  for (let t = 0; t < 100; t++) {
    rows = await ledgerSessionsAt(port, API_TOKEN, tenant);
    if (rows.length > 0 && rows.every((r) => r.end !== null)) break;
    await delay(200);
  }
  assert.deepEqual(
    rows.filter((r) => r.end === null).map((r) => r.sessionKey),
    [],
    'every ledger session ended',
  );
  assert.ok(rows.length >= rounds, `at least one session per round (${rows.length})`);
  const ids = rows.flatMap((r) => r.segments.map((g) => g.upstreamSessionId)).sort();
  assert.deepEqual(ids, upstream.map((s) => s.sessionId).sort(), 'each upstream session in exactly one ledger session');
  for (const r of rows)
    assert.ok(r.credits > 0, `ledger session ${r.sessionKey} has its credits (${r.credits}, ${r.outcome})`);
  return rows;
}

/** `rounds` times: two connections with one new key and token at once, to `urls(key, token)`. */
async function race(
  issue: () => Promise<string>,
  urls: (key: string, token: string) => [string, string],
  rounds: number,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  for (let round = 0; round < rounds; round++) {
    const [a, b] = urls(newResumeKey(), await issue());
    outcomes.push(...(await Promise.all([tab(a), tab(b)])));
  }
  assert.deepEqual(
    outcomes.filter((o) => !answered(o)),
    [],
    'every client was answered: a refusal, the end message, or an error before its close',
  );
  return outcomes;
}

describe('one new resume key on two replicas at once', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, { USAGE_API_TOKEN: API_TOKEN, RESUME_GRACE_SECONDS: '2' });
  }, 60_000);
  afterAll(() => cluster?.close());

  it('one session per upstream session in the ledger, each ended with credits; no client left without an answer', async () => {
    const tenant = 'key-race';
    const url = (i: number, key: string, token: string) =>
      resumeUrl(`ws://127.0.0.1:${cluster.replicas[i].port}`, tenant, key, token);
    const outcomes = await race(
      () => cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' }),
      (key, token) => [url(0, key, token), url(1, key, token)],
      ROUNDS,
    );
    const upstream = cluster.emulator.sessions.filter((s) => s.tenant === tenant);
    const rows = await assertLedger(cluster.replicas[0].adminPort, tenant, upstream, ROUNDS);
    console.log(
      `key race: ${outcomes.filter((o) => 'refused' in o).length} of ${outcomes.length} connections refused; ${rows.length} ledger sessions, ${upstream.length} upstream sessions`,
    );
  }, 180_000);
});

describe('one new resume key twice at once on one replica without Redis', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ USAGE_API_TOKEN: API_TOKEN });
  });
  afterAll(() => stack?.close());

  it('the in-process claim: one session per upstream session, each ended with credits; every client answered', async () => {
    const url = (key: string, token: string) => resumeUrl(stack.base, 'base', key, token);
    const outcomes = await race(
      () => stack.token('openid transcribe'),
      (key, token) => [url(key, token), url(key, token)],
      ROUNDS,
    );
    await assertLedger(stack.gateway.server.adminPort, 'base', stack.emulator.sessions, ROUNDS);
    console.log(
      `key race, one replica: ${outcomes.filter((o) => 'refused' in o).length} of ${outcomes.length} connections refused`,
    );
  }, 180_000);
});
