// The handover at drain, with two real gateway processes sharing one redis-server and one
// emulator: SIGTERM on the replica that holds a resumable session ends its upstream session (usage
// final), closes the client with 1012 "handed over", and the client goes on on the other replica
// with its key: every final once, on one timeline; one ledger session with two upstream segments;
// the tenant's one slot held throughout. A hand-written client resends from the `audioBytes` it is
// given; the unmodified vendor SDK reconnects by itself through a balancer.
import assert from 'node:assert/strict';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { resendFrom, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey, streamWithSdk } from '../support/sdk.js';
import { endpointPath, openClient, refusal, type TestClient } from '../support/stack.js';
import { startTcpBalancer } from '../support/tcp-balancer.js';
import { finals, type Final } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const API_TOKEN = 'handover-usage-token';
const pieces = chromeChunks('webm-opus'); // ~9 s of live Chromium WebM/Opus, 0.3 s a piece
const stream = Buffer.concat(pieces);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

/** Every final once, in order, nothing lost: each starts where the one before ended (the successor
 *  goes on mid-Cluster where the owner stopped, and no piece was on the wire when the 1012 close left). */
function assertOnce(f: Final[], until: number, label: string): void {
  assert.ok(f.length > 3, `${label}: finals arrived (${f.length})`);
  for (let i = 1; i < f.length; i++) {
    assert.ok(
      f[i].start >= f[i - 1].end - 0.01 && f[i].start <= f[i - 1].end + 0.01,
      `${label}: final ${i} (${f[i].start}-${f[i].end}) follows final ${i - 1} (${f[i - 1].start}-${f[i - 1].end}) once`,
    );
  }
  assert.ok(f.at(-1)!.end > until, `${label}: the finals cover the audio (last ends at ${f.at(-1)!.end})`);
}

/** The `event` names in a replica's JSON log, in order: what it did, without the rest of its output. */
const logEvents = (output: string) => [...output.matchAll(/"event":"([a-z_]+)"/g)].map((m) => m[1]).join(' ');

async function ledger(port: number, tenant: string): Promise<any[]> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/usage/sessions?tenant=${tenant}`, {
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { sessions: any[] }).sessions;
}

/** The ledger once every session of `tenant` ended (journal and queue flushed). */
async function endedSessions(port: number, tenant: string): Promise<any[]> {
  let rows = await ledger(port, tenant);
  for (let k = 0; k < 300 && (rows.length === 0 || rows.some((r) => r.end === null)); k++)
    rows = await delay(100).then(() => ledger(port, tenant));
  return rows;
}

/** The tenant's one session in the ledger, ended, of two upstream segments, with the upstream's credits. */
async function assertOneLedgerSession(cluster: Cluster, tenant: string): Promise<void> {
  const rows = await endedSessions(cluster.replicas[1].adminPort, tenant);
  assert.equal(rows.length, 1, 'one ledger session');
  assert.notEqual(rows[0].end, null, `the ledger session ended: ${JSON.stringify(rows[0])}`);
  assert.equal(rows[0].segments.length, 2, 'two upstream segments');
  assert.equal(rows[0].estimated, false);
  const upstream = cluster.emulator.sessions.filter((s) => s.tenant === tenant);
  assert.equal(upstream.length, 2);
  const reported = upstream.reduce(
    (n, s) =>
      n + ((s.sent as Array<{ type: string; credits?: number }>).find((m) => m.type === 'usage')?.credits ?? NaN),
    0,
  );
  assert.ok(Math.abs(rows[0].credits - reported) < 1e-6, `ledger ${rows[0].credits} = upstream ${reported}`);
}

/** A TCP relay to the replica `target()` names at each connection, whose client-to-gateway direction
 *  is `ms` late (a far client): what the client sends just before the gateway's close is on the wire. */
async function slowUplink(target: () => number, ms: number): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const gateway = net.connect(target(), '127.0.0.1');
    for (const s of [client, gateway]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => (client.destroy(), gateway.destroy()));
    }
    client.on('data', (d: Buffer) => void setTimeout(() => gateway.write(d), ms));
    gateway.on('data', (d: Buffer) => client.write(d));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => (server.close(), sockets.forEach((s) => s.destroy())),
  };
}

describe('handover at drain between two gateway processes', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(2, {
      USAGE_API_TOKEN: API_TOKEN,
      MAX_SESSIONS_PER_TENANT: '1',
      DRAIN_SECONDS: '20',
      // Longer than the vendor SDK's wait before it reconnects: after a connection that lived under
      // 5 s it waits 1-5 s (drawn once per process). At 4 s the handed-over record could expire first,
      // and the SDK's late resume then opened a new session instead.
      RESUME_GRACE_SECONDS: '10',
    });
  });
  afterEach(() => cluster?.allUp());
  afterAll(() => cluster?.close());

  const url = (i: number, token: string, tenant: string, key: string) =>
    `ws://127.0.0.1:${cluster.replicas[i].port}${endpointPath('transcribe')}?tenant-name=${tenant}&resume=${key}&token=${encodeURIComponent(`Bearer ${token}`)}`;

  /** A resumable session on replica 0 that has streamed `n` pieces in real time and had a transcript back. */
  const streamingOnOwner = async (tenant: string, key: string, n = 12) => {
    const token = () => cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const first = await openClient(url(0, await token(), tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    for (const piece of pieces.slice(0, n)) {
      first.send(piece);
      await delay(100);
    }
    await first.next('transcript', 10_000);
    return { first, token };
  };

  it('a hand-written client: closed 1012 "handed over", resumes on the other replica, resends from audioBytes; one session, two segments, one slot', async () => {
    const tenant = 'handover';
    const key = newResumeKey();
    const token = () => cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const first = await openClient(url(0, await token(), tenant, key));
    first.sendJson({ type: 'config', configuration });
    await first.next('CONFIG_ACCEPTED');
    const half = 14;
    for (const piece of pieces.slice(0, half)) {
      first.send(piece);
      await delay(100);
    }
    await first.next('transcript', 10_000);

    const exit = cluster.stop(0);
    const closed = await first.closed;
    assert.equal(closed.code, 1012);
    assert.match(closed.reason, /handed over/);
    // The session's one slot is still taken (the cap is 1), on either replica.
    const over = await refusal(url(1, await token(), tenant, newResumeKey()));
    assert.equal(over.status, 429);

    const second: TestClient = await openClient(url(1, await token(), tenant, key));
    second.sendJson({ type: 'config', configuration });
    const accepted = await second.next('CONFIG_ACCEPTED', 35_000);
    assert.equal(accepted.resumed, true);
    assert.ok(accepted.audioBytes > 0 && accepted.audioBytes <= stream.length, `audioBytes ${accepted.audioBytes}`);
    await resendFrom(second, stream, accepted.audioBytes);
    assert.equal(
      (await refusal(url(1, await token(), tenant, newResumeKey()))).status,
      429,
      'still one slot, now held by the other replica',
    );
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);
    assert.equal((await second.closed).code, 1000);
    assert.equal(await exit, 0, cluster.replicas[0].output().slice(-3000));

    const all = [...first.messages, ...second.messages];
    assert.deepEqual(
      all.filter((m) => m.type === 'error'),
      [],
    );
    assertOnce(finals(all), 8.5, 'hand-written');
    assert.deepEqual(second.types().slice(-2), ['usage', 'ended']);

    await assertOneLedgerSession(cluster, tenant);
    // The slot was released at the end: a new session of the tenant is let in.
    const next = await openClient(url(1, await token(), tenant, newResumeKey()));
    next.ws.close();
  });

  /** The unmodified SDK streams the recording through a balancer; the replica holding its session
   *  gets SIGTERM (and leaves the balancer) once piece `drainAfter` is sent, `delayMs` later. */
  const sdkThroughDrain = async (tenant: string, drainAfter: number, delayMs = 0) => {
    const balancer = await startTcpBalancer(cluster.replicas.map((r) => r.port));
    try {
      let exit: Promise<number | null> | undefined;
      let owner = -1;
      const run = await streamWithSdk({
        base: `ws://127.0.0.1:${balancer.port}`,
        tenant,
        token: await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' }),
        endpoint: 'transcribe',
        configuration,
        pieces,
        pieceMs: 300,
        resumeKey: newResumeKey(),
        onPiece: (i) => {
          if (i !== drainAfter) return;
          owner = cluster.replicas.findIndex(
            (r) => r.output().includes('"session_start"') && r.output().includes(tenant),
          );
          const stop = () => {
            balancer.down(owner);
            exit = cluster.stop(owner);
          };
          if (delayMs) setTimeout(stop, delayMs);
          else stop();
        },
      });
      assert.ok(owner >= 0);
      assert.equal(await exit, 0, cluster.replicas[owner].output().slice(-3000));
      assert.deepEqual(run.errors, []);
      assert.deepEqual(
        run.messages.filter((m) => m.type === 'error'),
        [],
      );
      return { run, owner };
    } finally {
      await balancer.close();
    }
  };

  it('audio frames that reach the owner in one read as its handover begins are all taken before its 1012', async () => {
    const tenant = 'handover-burst';
    const key = newResumeKey();
    const { first, token } = await streamingOnOwner(tenant, key);
    const exit = cluster.stop(0);
    await delay(150); // the handover has begun: its 1012 waits for the next audio message
    // Three pieces in one write, as a client back from a reconnection sends what it queued.
    const socket = (first.ws as unknown as { _socket: import('node:net').Socket })._socket;
    socket.cork();
    for (const piece of pieces.slice(12, 15)) first.send(piece);
    process.nextTick(() => socket.uncork());
    assert.match((await first.closed).reason, /handed over/);
    const second = await openClient(url(1, await token(), tenant, key));
    second.sendJson({ type: 'config', configuration });
    const accepted = await second.next('CONFIG_ACCEPTED', 35_000);
    const sent = pieces.slice(0, 15).reduce((n, p) => n + p.length, 0);
    assert.equal(accepted.audioBytes, sent, 'the owner took every frame of the write before it closed');
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);
    assert.equal(await exit, 0);
  });

  it('the unmodified SDK through a balancer: reconnects by itself to the other replica and gets every final once', async () => {
    const tenant = 'handover-sdk';
    const { run, owner } = await sdkThroughDrain(tenant, 12);
    assert.ok(run.closeCodes.includes(1012), `closed 1012 once (${run.closeCodes})`);
    assertOnce(finals(run.messages), 8.5, 'SDK');
    const rows = await endedSessions(cluster.replicas[1 - owner].adminPort, tenant);
    assert.equal(rows.length, 1, 'one ledger session');
    assert.equal(rows[0].segments.length, 2, 'two upstream segments');
  });

  it('the SDK handed over after its last piece: it resumes with its config and end and no more audio, and the other replica ends the session', async () => {
    // The drain starts before the last piece, which closes it 1012; the SDK's reconnection (1-5 s
    // later) sends only the config and `end`: no media comes to open the next upstream session.
    const { run, owner } = await sdkThroughDrain('handover-sdk-last', pieces.length - 2);
    assert.deepEqual(run.closeCodes.slice(0, 1), [1012]);
    const said = logEvents(cluster.replicas[1 - owner].output());
    assertOnce(finals(run.messages), 8.5, `SDK resumed with nothing more to send (the other replica said ${said})`);
    assert.deepEqual(run.messages.map((m) => m.type).slice(-2), ['usage', 'ended']);
  });

  it('the SDK ends its session while the drain hands it over: the session ends on its replica, nothing moves', async () => {
    // The drain starts 150 ms after the last piece, and the SDK sends `end` 300 ms after it: the end
    // reaches the owner while it hands the session over, before its 1012 (which waits for the next audio,
    // at most 350 ms), and a successor would never hear it.
    const tenant = 'handover-sdk-ended';
    const { run, owner } = await sdkThroughDrain(tenant, pieces.length - 1, 150);
    assertOnce(finals(run.messages), 8.5, `SDK ended during the handover (closes ${run.closeCodes})`);
    assert.deepEqual(run.messages.map((m) => m.type).slice(-2), ['usage', 'ended']);
    // On a machine slow enough for the 1012 to leave first, the session moves and ends on the other
    // replica (the end then goes there): every final and `ended` still, checked above.
    if (run.closeCodes.includes(1012)) return;
    assert.equal(run.reopens, 0);
    const rows = await endedSessions(cluster.replicas[1 - owner].adminPort, tenant);
    assert.equal(rows.length, 1, 'one ledger session');
    assert.equal(rows[0].segments.length, 1, 'one upstream segment: it ended where it was');
  });

  it("the SDK's piece on the wire when the drain starts is not lost: the 1012 close waits for it", async () => {
    const tenant = 'handover-in-flight';
    const seen = cluster.replicas[1].output().length; // replica 1's log from here on
    let owner = 0;
    const uplink = await slowUplink(() => cluster.replicas[owner].port, 200);
    try {
      let exit: Promise<number | null> | undefined;
      const run = await streamWithSdk({
        base: `ws://127.0.0.1:${uplink.port}`,
        tenant,
        token: await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' }),
        endpoint: 'transcribe',
        configuration,
        pieces,
        pieceMs: 300,
        resumeKey: newResumeKey(),
        onPiece: (i) => {
          if (i !== 12) return;
          owner = 1; // the reconnection goes to the other replica
          exit = cluster.stop(0); // piece 12 reaches replica 0 200 ms from now, after its drain began
        },
      });
      assert.equal(await exit, 0, cluster.replicas[0].output().slice(-3000));
      assert.ok(run.closeCodes.includes(1012), `closed 1012 once (${run.closeCodes})`);
      assertOnce(
        finals(run.messages),
        8.5,
        `SDK, a piece on the wire (closes ${run.closeCodes}, errors ${run.errors}, messages ${run.messages.map((m) => [m.type, m.reason, m.error?.id ?? m.id].filter(Boolean).join(' '))}; replica 0 said ${logEvents(cluster.replicas[0].output())}; replica 1 said ${cluster.replicas[1].output().slice(seen).slice(0, 4000)})`,
      );
    } finally {
      uplink.close();
    }
  });

  it('a resume that arrives while the handover waits for the upstream is accepted at once (the SDK gives up after 4 s) and restored once it is done', async () => {
    const tenant = 'handover-slow';
    const key = newResumeKey();
    const { first, token } = await streamingOnOwner(tenant, key);
    cluster.emulator.faults.stall = true; // the upstream's answer to the handover's `end` waits
    const exit = cluster.stop(0);
    assert.match((await first.closed).reason, /handed over/);

    const asked = Date.now();
    const second = await openClient(url(1, await token(), tenant, key));
    assert.ok(Date.now() - asked < 4000, `open in ${Date.now() - asked} ms`);
    second.sendJson({ type: 'config', configuration }); // held until the session is here
    await delay(5000);
    assert.deepEqual(second.types(), [], 'nothing answered before the handover is done');
    cluster.emulator.faults.stall = false;
    const accepted = await second.next('CONFIG_ACCEPTED', 30_000);
    assert.equal(accepted.resumed, true);
    await resendFrom(second, stream, accepted.audioBytes);
    second.sendJson({ type: 'end' });
    await second.next('ended', 30_000);
    assert.equal(await exit, 0);
    assertOnce(finals([...first.messages, ...second.messages]), 8.5, 'slow handover');
    await assertOneLedgerSession(cluster, tenant); // the restored session writes to the same ledger session
  });

  it('an owner killed while it hands the session over (its termination grace ran out): the waiting resume takes the session over', async () => {
    const tenant = 'handover-killed';
    const key = newResumeKey();
    const { first, token } = await streamingOnOwner(tenant, key);
    await delay(2200); // the record's refresh
    cluster.emulator.faults.stall = true; // the handover's `end` is never answered
    try {
      void cluster.stop(0);
      assert.match((await first.closed).reason, /handed over/);
      const second = await openClient(url(1, await token(), tenant, key));
      second.sendJson({ type: 'config', configuration });
      await delay(1000);
      await cluster.kill(0);
      cluster.emulator.faults.stall = false;
      const accepted = await second.next('CONFIG_ACCEPTED', 10_000);
      assert.equal(accepted.resumed, true);
      await resendFrom(second, stream, accepted.audioBytes);
      second.sendJson({ type: 'end' });
      await second.next('ended', 30_000);
      const all = finals([...first.messages, ...second.messages]);
      for (let i = 1; i < all.length; i++) assert.ok(all[i].start >= all[i - 1].end - 0.01, `final ${i} once`);
      assert.ok(all.at(-1)!.end > 8.5);
      const text = await (await fetch(`http://127.0.0.1:${cluster.replicas[1].adminPort}/metrics`)).text();
      assert.match(text, /speech_gateway_takeovers_total\{from="crash"\} 1/);
    } finally {
      cluster.emulator.faults.stall = false;
    }
  });

  it('a handed-over session nobody resumes is ended by the other replica after the grace: ledger closed, slot released', async () => {
    const tenant = 'handover-gone';
    const { first: client, token } = await streamingOnOwner(tenant, newResumeKey(), 10);
    const exit = cluster.stop(0);
    assert.match((await client.closed).reason, /handed over/);
    assert.equal(await exit, 0);
    assert.equal(
      (await refusal(url(1, await token(), tenant, newResumeKey()))).status,
      429,
      'the slot waits for the client',
    );

    const rows = await endedSessions(cluster.replicas[1].adminPort, tenant); // grace 10 s + the janitor's 5 s round
    assert.equal(rows.length, 1);
    assert.equal(rows[0].outcome, 'client_gone');
    assert.equal(rows[0].estimated, false, 'the handover made its usage final');
    const next = await openClient(url(1, await token(), tenant, newResumeKey()));
    next.ws.close();
  });
});
