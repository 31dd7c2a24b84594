// Sockets that never send a config: one valid token opening thousands of them must not bill the
// tenant (no ledger session), count as active sessions, or hold the tenant's session slots. They
// are bounded per token (MAX_UNCONFIGURED_PER_TOKEN) and, much higher, per token subject
// (MAX_UNCONFIGURED_PER_SUBJECT), with a refusal before the upgrade; one token's idle sockets leave
// other tokens of the same client alone, and a burst that sends its configs as it opens passes. The
// tenant cap is taken when a config arrives, and a config over it is refused on the socket.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import WebSocket from 'ws';
import { fixture } from '../support/fixtures.js';
import { metric } from '../support/metrics.js';
import { endpointPath, openClient, startStack, type Stack, type TestClient } from '../support/stack.js';
import { until } from '../support/wait.js';

const API_TOKEN = 'unconfigured-ops-token';
const SOCKETS = 5000;
const BATCH = 250;
const BOUND = 10;
/** Three times the bound, opened at once by one token (a server client's start). */
const BURST = 3 * BOUND;
/** The capped stack's per-subject backstop (MAX_UNCONFIGURED_PER_SUBJECT): two tokens' bounds and a half. */
const BACKSTOP = 25;
const ogg = fixture('dictation.ogg');
const CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' };

/** A token of `tenant` whose subject is per `clientId` (the emulator derives `sub` from both). */
const tokenOf = (stack: Stack, tenant: string, clientId: string, withoutSubject = false) =>
  stack.emulator.issueToken({ tenant, clientId, scope: 'openid transcribe', withoutSubject });
const urlOf = (stack: Stack, tenant: string, token: string) =>
  `${stack.base}${endpointPath('transcribe')}?${new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}` })}`;

type Opened = { ws: WebSocket } | { status: number; id?: string };

/** A bare client socket: open, or the HTTP refusal of its upgrade with the error id. */
function open(url: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          id: (JSON.parse(body || '{}') as { error?: { id?: string } }).error?.id,
        }),
      );
    });
    ws.once('error', reject);
  });
}

/** `n` sockets, at most BATCH opening at a time; what was accepted stays open. */
async function openMany(url: string, n: number) {
  const accepted: WebSocket[] = [];
  const refused = new Map<string, number>();
  let started = 0;
  const worker = async () => {
    while (started < n) {
      started++;
      const r = await open(url);
      if ('ws' in r) accepted.push(r.ws);
      else refused.set(`${r.status} ${r.id}`, (refused.get(`${r.status} ${r.id}`) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: Math.min(BATCH, n) }, worker));
  return { accepted, refused };
}

/** A session that sends its config as soon as it opens: what answered it (CONFIG_ACCEPTED, or the upgrade's refusal), then ends. */
async function configuredSession(url: string): Promise<string> {
  const r = await open(url);
  if (!('ws' in r)) return `${r.status} ${r.id}`;
  const ws = r.ws;
  ws.send(JSON.stringify({ type: 'config', configuration: CONFIG }));
  const closed = new Promise((resolve) => ws.once('close', resolve));
  const answer = await new Promise<string>((resolve) => {
    ws.on('message', (d: Buffer) => {
      const m = JSON.parse(d.toString()) as { type: string; error?: { id: string } };
      if (m.type === 'CONFIG_ACCEPTED' || m.type === 'error') resolve(m.error?.id ?? m.type);
    });
    ws.once('close', (code: number) => resolve(`closed ${code}`));
  });
  ws.send(JSON.stringify({ type: 'end' }));
  await closed;
  return answer;
}

const terminate = (...groups: { accepted: WebSocket[] }[]) => {
  for (const g of groups) for (const ws of g.accepted) ws.terminate();
};

async function ledgerSessionCount(stack: Stack, tenant: string): Promise<number> {
  const from = new Date(Date.now() - 86_400_000).toISOString();
  const to = new Date(Date.now() + 86_400_000).toISOString();
  const res = await fetch(
    `http://127.0.0.1:${stack.gateway.server.adminPort}/v1/usage?tenant=${tenant}&from=${from}&to=${to}&granularity=day`,
    {
      headers: { authorization: `Bearer ${API_TOKEN}` },
    },
  );
  return ((await res.json()) as { total: { sessions: number } }).total.sessions;
}

/** A whole dictation: config, audio, end; the ledger then has one more session. */
async function dictate(c: TestClient): Promise<void> {
  c.sendJson({ type: 'config', configuration: CONFIG });
  await c.next('CONFIG_ACCEPTED');
  for (let off = 0; off < ogg.length; off += 8000) c.send(ogg.subarray(off, off + 8000));
  c.sendJson({ type: 'end' });
  await c.next('ended', 30_000);
}

describe('sockets that never send a config', () => {
  let stack: Stack;
  let capped: Stack;
  beforeAll(async () => {
    const env = { USAGE_API_TOKEN: API_TOKEN, PACE: '50', CONFIG_TIMEOUT_MS: '60000' };
    [stack, capped] = await Promise.all([
      startStack(env),
      startStack({ ...env, MAX_SESSIONS_PER_TENANT: '2', MAX_UNCONFIGURED_PER_SUBJECT: String(BACKSTOP) }),
    ]);
  });
  afterAll(async () => {
    await stack?.close();
    await capped?.close();
  });

  it(`${SOCKETS} unconfigured sockets with one token: past the bound refused before the upgrade, no ledger session, no active session`, async () => {
    const tenant = 'idle-flood';
    const sessionsBefore = await ledgerSessionCount(stack, tenant);
    const activeBefore = await metric(stack.gateway.server.adminPort, 'speech_gateway_active_sessions');
    const url = urlOf(stack, tenant, await tokenOf(stack, tenant, 'flooder'));

    const { accepted, refused } = await openMany(url, SOCKETS);
    try {
      assert.equal(
        await metric(stack.gateway.server.adminPort, 'speech_gateway_active_sessions'),
        activeBefore,
        'unconfigured sockets are not active sessions',
      );
      // A configured session of another subject of the tenant: the ledger has it, and only it.
      await dictate(await openClient(urlOf(stack, tenant, await tokenOf(stack, tenant, 'dictating'))));
      await until(
        async () => (await ledgerSessionCount(stack, tenant)) > sessionsBefore,
        'the dictation in the ledger',
      );
      assert.equal(
        await ledgerSessionCount(stack, tenant),
        sessionsBefore + 1,
        `${SOCKETS} unconfigured sockets left /v1/usage's sessions unchanged`,
      );

      assert.equal(
        accepted.length,
        BOUND,
        `at most MAX_UNCONFIGURED_PER_SUBJECT (${BOUND}) open; refused: ${JSON.stringify([...refused])}`,
      );
      assert.deepEqual(
        [...refused],
        [['429 UNCONFIGURED_LIMIT', SOCKETS - BOUND]],
        'every other socket refused before the upgrade',
      );
      assert.equal(await metric(stack.gateway.server.adminPort, 'speech_gateway_unconfigured_sockets'), BOUND);
    } finally {
      for (const ws of accepted) ws.terminate();
    }
    // Closed sockets give their place back: the same token opens its bound again.
    await until(
      async () => (await metric(stack.gateway.server.adminPort, 'speech_gateway_unconfigured_sockets')) === 0,
      'the unconfigured sockets to be released',
    );
    const again = await openMany(url, BOUND);
    assert.equal(again.accepted.length, BOUND);
    for (const ws of again.accepted) ws.terminate();
  });

  it('a token holder reopening unconfigured sockets does not keep configured sessions of the tenant out', async () => {
    const stack = capped;
    const tenant = 'capped';
    const idle = urlOf(stack, tenant, await tokenOf(stack, tenant, 'idle-holder'));
    const worker = urlOf(stack, tenant, await tokenOf(stack, tenant, 'worker'));
    let held: WebSocket[] = [];
    // The holder keeps its bound of sockets open and reopens them, as every 10 s in the report.
    for (let round = 0; round < 3; round++) {
      for (const ws of held) ws.terminate();
      await until(
        async () => (await metric(stack.gateway.server.adminPort, 'speech_gateway_unconfigured_sockets')) === 0,
        "the holder's sockets released",
      );
      held = (await openMany(idle, BOUND)).accepted;
      assert.equal(held.length, BOUND);
    }
    try {
      // Cap 2: three sockets opened before any config; two configs are accepted, the third refused at config time.
      const clients = await Promise.all([openClient(worker), openClient(worker), openClient(worker)]);
      for (const c of clients) c.sendJson({ type: 'config', configuration: CONFIG });
      const answers = await Promise.all(
        clients.map((c) =>
          Promise.race([
            c.next('CONFIG_ACCEPTED', 20_000).then(() => 'accepted'),
            c.next('error', 20_000).then((m) => m.error.id),
          ]),
        ),
      );
      assert.deepEqual([...answers].sort(), ['TENANT_SESSION_LIMIT', 'accepted', 'accepted']);
      const refusedClient = clients[answers.indexOf('TENANT_SESSION_LIMIT')];
      assert.equal((await refusedClient.closed).code, 1013, 'closed with 1013 (try again later)');
      // With both slots held by configured sessions, a new socket is refused at the upgrade already.
      const over = await open(worker);
      assert.ok(!('ws' in over), 'the upgrade is refused at the cap');
      assert.deepEqual(over, { status: 429, id: 'TENANT_SESSION_LIMIT' });
      for (const c of clients) if (c !== refusedClient) c.sendJson({ type: 'end' });
      await Promise.all(clients.filter((c) => c !== refusedClient).map((c) => c.next('ended', 20_000)));
      // Slots given back: a new session of the tenant is accepted again.
      await until(
        async () => 'ws' in (await open(worker).then((r) => ('ws' in r ? (r.ws.terminate(), r) : r))),
        'a slot free again',
      );
    } finally {
      for (const ws of held) ws.terminate();
    }
  });
  it('a token at its bound refuses no other token of the same client (one subject), nor another token without a subject', async () => {
    for (const [tenant, withoutSubject] of [
      ['one-client', false],
      ['no-subject', true],
    ] as const) {
      const holder = urlOf(stack, tenant, await tokenOf(stack, tenant, 'service', withoutSubject));
      const other = urlOf(stack, tenant, await tokenOf(stack, tenant, 'service', withoutSubject));
      const held = await openMany(holder, BOUND + 5);
      const theirs = await openMany(other, BOUND);
      try {
        assert.equal(held.accepted.length, BOUND, `${tenant}: the holder keeps its bound`);
        assert.deepEqual([...held.refused], [['429 UNCONFIGURED_LIMIT', 5]], `${tenant}: the holder's extra sockets`);
        assert.deepEqual([...theirs.refused], [], `${tenant}: the other token's sockets are not refused`);
        assert.equal(theirs.accepted.length, BOUND);
      } finally {
        terminate(held, theirs);
      }
    }
  });

  it('past MAX_UNCONFIGURED_PER_SUBJECT the tokens of one subject are refused, each below its own bound', async () => {
    const tenant = 'backstop';
    const opened = [];
    try {
      for (let i = 0; i < 3; i++)
        opened.push(await openMany(urlOf(capped, tenant, await tokenOf(capped, tenant, 'service')), BOUND));
      assert.deepEqual(
        opened.map((o) => o.accepted.length),
        [BOUND, BOUND, BACKSTOP - 2 * BOUND],
      );
      assert.deepEqual([...opened[2].refused], [['429 UNCONFIGURED_LIMIT', 3 * BOUND - BACKSTOP]]);
    } finally {
      terminate(...opened);
    }
  });

  it(`${BURST} sessions of one token opened at once, each sending its config as it opens: none refused`, async () => {
    const url = urlOf(stack, 'burst', await tokenOf(stack, 'burst', 'server-client'));
    const answers = await Promise.all(Array.from({ length: BURST }, () => configuredSession(url)));
    const tally = new Map<string, number>();
    for (const a of answers) tally.set(a, (tally.get(a) ?? 0) + 1);
    assert.deepEqual([...tally], [['CONFIG_ACCEPTED', BURST]]);
  });
});
