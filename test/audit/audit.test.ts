// The audit trail over real sockets: a run of sessions (a normal one, a refused config, a refused
// upgrade without a token, one for the wrong tenant, a resume) and usage API calls write one event
// per step and per refusal, each with who and from where, and nothing a patient said or sent, nor a
// token. Then GET /v1/audit (tenant, range, paging, a scoped token's 403) and the Redis store's
// retention.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { clientAddress, createAudit, trustedProxyList } from '../../src/audit/index.js';
import { logger, registry } from '../../src/telemetry/index.js';
import { chromeChunks } from '../support/fixtures.js';
import {
  endpointPath,
  englishConfiguration,
  openClient,
  openConfigured,
  refusal,
  resumeUrl,
  startStack,
  type Stack,
  type TestClient,
} from '../support/stack.js';
import { metric } from '../support/metrics.js';
import { finals } from '../support/transcripts.js';
import { until, delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';

const API = 'audit-test-all-tenants-token';
const SCOPED = 'audit-test-scoped-token-for-other';
const chunks = chromeChunks('webm-opus');
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
type Event = Record<string, any>;

/** A series of this process's registry (the in-process audit trails count here). */
async function metricValue(series: string): Promise<number> {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const readEvents = (file: string): Event[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);

describe('the audit stream of a run of sessions', () => {
  let stack: Stack;
  let file: string;
  const tokens: string[] = [API, SCOPED];
  const received: TestClient[] = [];
  const key = randomBytes(18).toString('base64url');

  async function dictate(c: TestClient, from = 0): Promise<void> {
    for (const chunk of chunks.slice(from)) c.send(chunk);
    c.sendJson({ type: 'end' });
    await c.next('ended', 20_000);
  }

  beforeAll(async () => {
    file = join(mkdtempSync(join(tmpdir(), 'sg-audit-')), 'trail', 'audit.jsonl');
    stack = await startStack({
      PACE: '8',
      AUDIT_LOG_FILE: file,
      USAGE_API_TOKEN: API,
      USAGE_API_TOKENS: JSON.stringify({ dash: { token: SCOPED, tenants: ['other'] } }),
      TRUSTED_PROXIES: '2',
      TRUSTED_PROXY_CIDRS: '127.0.0.0/8,::1',
      RESUME_GRACE_SECONDS: '5',
    });
    // A normal session, behind two proxies.
    const token = await stack.token('openid transcribe');
    tokens.push(token);
    const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
    const normal = await openClient(`${stack.base}${endpointPath('transcribe')}?${q}`, undefined, {
      'X-Forwarded-For': '10.9.9.9, 203.0.113.7, 198.51.100.9',
    });
    received.push(normal);
    normal.sendJson({ type: 'config', configuration });
    await normal.next('CONFIG_ACCEPTED');
    await dictate(normal);
    // A refused config; a refused upgrade without a token; one for the wrong tenant.
    const denied = await stack.connect('transcribe');
    denied.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'video/x-msvideo' } });
    await denied.next('CONFIG_REJECTED');
    await denied.closed;
    await refusal(`${stack.base}${endpointPath('transcribe')}?tenant-name=base`);
    const elsewhere = await stack.token('openid transcribe');
    tokens.push(elsewhere);
    await refusal(`${stack.base}${endpointPath('transcribe')}?tenant-name=other&token=Bearer%20${elsewhere}`);
    // A resume: cut mid-dictation, taken over again with the same key.
    const resumeToken = await stack.token('openid transcribe');
    tokens.push(resumeToken);
    const url = resumeUrl(stack.base, 'base', key, resumeToken);
    const { client: first } = await openConfigured(url, configuration);
    for (const chunk of chunks.slice(0, 12)) first.send(chunk);
    await delay(300);
    first.ws.terminate();
    await delay(300);
    const { client: second, accepted: resumed } = await openConfigured(url, configuration);
    assert.equal(resumed.resumed, true);
    received.push(first, second);
    const whole = Buffer.concat(chunks);
    for (let off = resumed.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    // The usage API: the all-tenant token, and a scoped token asking for another tenant.
    const http = `http://127.0.0.1:${stack.gateway.server.adminPort}`; // the usage API's port
    await fetch(`${http}/v1/tenants`, { headers: { authorization: `Bearer ${API}` } });
    await fetch(`${http}/v1/usage/sessions?tenant=base`, { headers: { authorization: `Bearer ${SCOPED}` } });
    await until(
      () => readEvents(file).filter((e) => e.event === 'session_ended').length >= 3,
      'three sessions ended in the audit file',
    );
  });
  afterAll(() => stack?.close());

  it('the file is 0600 in a 0700 directory, one JSON event a line with an ISO time', () => {
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(join(file, '..')).mode & 0o777, 0o700);
    for (const e of readEvents(file)) {
      assert.equal(new Date(e.time).toISOString(), e.time);
      assert.equal(typeof e.event, 'string');
      assert.equal(typeof e.outcome, 'string');
    }
  });

  it('one event per session step, with who (subject, client id) and from where (X-Forwarded-For, TRUSTED_PROXIES=2)', () => {
    const events = readEvents(file).filter((e) => e.address === '203.0.113.7');
    assert.ok(
      events.every((e) => e.sessionId === events[0].sessionId),
      'one session',
    );
    assert.deepEqual(
      events.map((e) => e.event),
      ['upgrade_accepted', 'session_opened', 'config_accepted', 'session_ended'],
    );
    for (const e of events) {
      assert.equal(e.address, '203.0.113.7');
      assert.equal(e.tenant, 'base');
      assert.match(e.subject, /^service-account-/);
      assert.equal(e.clientId, 'dev');
      assert.equal(e.endpoint, 'transcribe');
    }
    const end = events.at(-1)!;
    assert.equal(end.outcome, 'ended');
    assert.ok(end.mediaSeconds > 5, `mediaSeconds ${end.mediaSeconds}`);
    assert.ok(end.credits > 0, `credits ${end.credits}`);
  });

  it('the refused config, the refused upgrades and the resume each have their events', () => {
    const events = readEvents(file);
    const refusedConfig = events.find((e) => e.event === 'config_refused')!;
    assert.equal(refusedConfig.reason, 'config_rejected');
    assert.match(refusedConfig.subject, /^service-account-/);
    assert.ok(events.some((e) => e.event === 'session_ended' && e.sessionId === refusedConfig.sessionId));
    const upgrades = events.filter((e) => e.event === 'upgrade_refused');
    assert.deepEqual(
      upgrades.map((e) => e.reason),
      ['token_missing', upgrades[1]?.reason],
    );
    assert.notEqual(upgrades[1].reason, 'token_missing');
    for (const e of upgrades) {
      assert.match(e.address, /127\.0\.0\.1/, 'no X-Forwarded-For: the socket peer');
      assert.equal(e.subject, undefined, 'no token verified');
      assert.equal(e.outcome, 'refused');
    }
    // The link is keyed (not the key's plain SHA-256, which names its session record): found from the resume.
    const hash = events.find((e) => e.event === 'session_resumed')!.resumeKeyHash;
    assert.notEqual(hash, createHash('sha256').update(key).digest('hex').slice(0, 16));
    const resume = events.filter((e) => e.resumeKeyHash === hash);
    assert.deepEqual(
      resume.map((e) => e.event),
      ['upgrade_accepted', 'session_opened', 'config_accepted', 'upgrade_accepted', 'session_resumed', 'session_ended'],
    );
    assert.ok(resume.every((e) => e.sessionId === resume[0].sessionId && e.subject));
    assert.equal(resume[3].kind, 'resume');
  });

  it('each usage API call: the token by name, the path, the tenant asked, the outcome', () => {
    const calls = readEvents(file).filter((e) => e.event === 'usage_api_call');
    assert.deepEqual(
      calls.map((e) => [e.caller, e.path, e.tenant, e.asked, e.status, e.error]),
      [
        ['USAGE_API_TOKEN', '/v1/tenants', undefined, undefined, 200, undefined],
        ['dash', '/v1/usage/sessions', 'other', 'base', 403, 'USAGE_TENANT_FORBIDDEN'],
      ],
    );
    assert.ok(calls.every((e) => /127\.0\.0\.1/.test(e.address)));
  });

  it('holds no transcript text, no token, no resume key, no audio', () => {
    const text = readFileSync(file, 'utf8');
    const said = received.flatMap((c) => finals(c.messages).map((f) => f.text.trim())).filter((t) => t.length >= 12);
    assert.ok(said.length > 0, 'the clients got transcripts');
    for (const t of said) assert.ok(!text.includes(t), `transcript text in the audit: ${t}`);
    for (const t of tokens) assert.ok(!text.includes(t) && !text.includes(t.split('.')[2]), 'a token in the audit');
    assert.ok(!text.includes(key), 'the resume key in the audit');
    const sample = chunks[6].subarray(100, 148);
    assert.ok(!text.includes(sample.toString('base64')) && !text.includes(sample.toString('hex')), 'audio');
  });

  it("GET /v1/audit: the tenant's events in the range, a page at a time; another tenant with a scoped token is 403", async () => {
    const http = `http://127.0.0.1:${stack.gateway.server.adminPort}`; // the usage API's port
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const get = async (q: string, token = API) => {
      const res = await fetch(`${http}/v1/audit?${q}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const all: Event[] = [];
    let cursor: string | null = null;
    do {
      const page = await get(`tenant=base&from=${from}&to=${to}&limit=5${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      assert.ok(page.body.events.length <= 5);
      all.push(...page.body.events);
      cursor = page.body.next;
    } while (cursor);
    const inFile = readEvents(file).filter((e) => e.tenant === 'base');
    assert.ok(all.length >= inFile.length - 2 && all.length > 10, `${all.length} of ${inFile.length}`);
    assert.ok(all.every((e) => e.tenant === 'base'));
    assert.deepEqual(
      all.map((e) => e.time),
      [...all.map((e) => e.time)].sort(),
    );
    const empty = await get(`tenant=base&from=2020-01-01&to=2020-01-02`);
    assert.deepEqual(empty.body.events, []);
    const forbidden = await get(`tenant=base&from=${from}&to=${to}`, SCOPED);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.id, 'USAGE_TENANT_FORBIDDEN');
    const own = await get(`tenant=other&from=${from}&to=${to}`, SCOPED);
    assert.equal(own.status, 200);
    assert.equal((await get(`tenant=base&from=${from}&to=${to}&limit=0`)).status, 400);
    assert.equal((await get(`tenant=base&from=${from}&to=${to}&cursor=nope`)).status, 400);
  });

  it('an X-Forwarded-For with fewer entries than TRUSTED_PROXIES: its leftmost', async () => {
    const token = await stack.token('openid transcribe');
    const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
    const c = await openClient(`${stack.base}${endpointPath('transcribe')}?${q}`, undefined, {
      'X-Forwarded-For': '198.51.100.20',
    });
    c.sendJson({ type: 'config', configuration: englishConfiguration('transcribe') });
    await c.next('CONFIG_ACCEPTED');
    c.ws.close();
    const mine = () => readEvents(file).filter((e) => e.address === '198.51.100.20');
    await until(() => mine().some((e) => e.event === 'session_ended'), 'its events');
    assert.deepEqual(
      mine().map((e) => e.event),
      ['upgrade_accepted', 'session_opened', 'config_accepted', 'session_ended'],
    );
  });
});

describe('the client address behind proxies', () => {
  const proxies = trustedProxyList(['10.0.0.0/8', '2001:db8::/32']);
  it('is the Nth entry from the right from a trusted peer when that is an IP address, else unknown (never the text a client put there)', () => {
    assert.equal(clientAddress('10.0.0.9', '203.0.113.7, 10.0.0.1', 2, proxies), '203.0.113.7');
    assert.equal(clientAddress('10.0.0.9', '2001:db8::1', 1, proxies), '2001:db8::1');
    assert.equal(clientAddress('::ffff:10.0.0.9', '203.0.113.7', 1, proxies), '203.0.113.7');
    assert.equal(clientAddress('2001:db8::5', '2001:db8:1::1', 1, proxies), '2001:db8:1::1');
    assert.equal(clientAddress('10.0.0.9', 'patient Jane Doe, 10.0.0.1', 2, proxies), 'unknown');
    assert.equal(clientAddress('10.0.0.9', '203.0.113.7', 0, proxies), '10.0.0.9');
    assert.equal(clientAddress('10.0.0.9', ' , ', 1, proxies), '10.0.0.9');
  });

  it('is the socket peer when the peer is no trusted proxy, or none is configured', () => {
    assert.equal(clientAddress('192.0.2.1', '203.0.113.7', 1, proxies), '192.0.2.1');
    assert.equal(clientAddress('10.0.0.9', '203.0.113.7', 1, undefined), '10.0.0.9');
  });

  it('takes addresses and CIDR ranges, and refuses anything else', () => {
    assert.equal(trustedProxyList([]), undefined);
    assert.ok(trustedProxyList(['192.0.2.7'])!.check('192.0.2.7'));
    assert.ok(!trustedProxyList(['192.0.2.7'])!.check('192.0.2.8'));
    for (const bad of ['10.0.0.0/', '10.0.0.0/33', 'fd00::/129', 'proxy.example', '10.0.0.0/8/1', '10.0.0.0/-1'])
      assert.throws(() => trustedProxyList([bad]), RangeError, bad);
  });
});

describe('the audit store in Redis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis?.stop());

  it("keeps a tenant's events for AUDIT_RETENTION_DAYS: older ones are trimmed at the next write", async () => {
    let now = Date.parse('2026-01-10T00:00:00Z');
    const dir = mkdtempSync(join(tmpdir(), 'sg-audit-redis-'));
    const prefix = `sg:audit:${randomBytes(4).toString('hex')}:`;
    const audit = await createAudit({
      file: join(dir, 'audit.jsonl'),
      redis: { url: redis.url },
      keyPrefix: prefix,
      retentionDays: 2,
      trustedProxies: 0,
      logger,
      now: () => now,
    });
    const day = 86_400_000;
    for (let i = 0; i < 4; i++) {
      audit.record({ event: 'session_opened', outcome: 'ok', tenant: 't1', sessionId: `s${i}` });
      audit.record({ event: 'session_opened', outcome: 'ok', tenant: 't2', sessionId: `x${i}` });
      now += day;
    }
    await audit.flush();
    // The last write (day 3) trimmed what was older than day 1; a write on day 4 trims day 1 too.
    audit.record({ event: 'session_opened', outcome: 'ok', tenant: 't1', sessionId: 's4' });
    await audit.flush();
    const client = new Redis(redis.url);
    assert.equal(await client.zcard(`${prefix}t1`), 3, 'days 2, 3 and 4 kept in Redis');
    await client.quit();
    const range = { from: Date.parse('2026-01-01T00:00:00Z'), to: Date.parse('2026-02-01T00:00:00Z') };
    const page = await audit.query({ tenant: 't1', ...range, limit: 100 });
    // Written on days 0-4, read on day 4 with 2 days' retention: days 2 to 4 are left.
    assert.deepEqual(
      page.events.map((e) => e.sessionId),
      ['s2', 's3', 's4'],
    );
    const first = await audit.query({ tenant: 't2', ...range, limit: 1 });
    const second = await audit.query({ tenant: 't2', ...range, limit: 1, cursor: first.next! });
    assert.deepEqual(
      [...first.events, ...second.events].map((e) => e.sessionId),
      ['x2', 'x3'],
    );
    assert.equal(second.next, null);
    // Redis away: the event still reaches the file, the store's failure is counted, a query fails.
    await redis.stop();
    const failed = await metricValue('speech_gateway_audit_write_failures_total{sink="store"}');
    audit.record({ event: 'session_opened', outcome: 'ok', tenant: 't1', sessionId: 'while-down' });
    await audit.flush();
    assert.equal(await metricValue('speech_gateway_audit_write_failures_total{sink="store"}'), failed + 1);
    assert.ok(readFileSync(join(dir, 'audit.jsonl'), 'utf8').includes('while-down'));
    await assert.rejects(audit.query({ tenant: 't1', ...range, limit: 1 }));
    await audit.close();
    await redis.restart();
  });
});

describe('an audit trail that cannot be written', () => {
  it('a full disk (AUDIT_LOG_FILE=/dev/full): sessions go on; each failed write is counted', async () => {
    const stack = await startStack({ AUDIT_LOG_FILE: '/dev/full' });
    try {
      const port = stack.gateway.server.adminPort;
      const before = await metric(port, 'speech_gateway_audit_write_failures_total{sink="log"}');
      const c = await stack.connect('transcribe');
      c.sendJson({ type: 'config', configuration: englishConfiguration('transcribe') });
      await c.next('CONFIG_ACCEPTED');
      c.sendJson({ type: 'end' });
      await c.next('ended');
      assert.equal((await c.closed).code, 1000);
      const after = await metric(port, 'speech_gateway_audit_write_failures_total{sink="log"}');
      assert.ok(after - before >= 4, `${after - before} failures counted`);
    } finally {
      await stack.close();
    }
  });

  const stdoutAudit = (events: number) =>
    spawn(process.execPath, ['--import', 'tsx', 'test/audit/stdout-audit.ts', String(events)], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      env: { ...process.env, LOG_LEVEL: 'silent' },
    });

  it('without AUDIT_LOG_FILE: one JSON line a event on stdout, marked "stream":"audit"', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'test/audit/stdout-audit.ts'], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      env: { ...process.env, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    const lines = run.stdout.split('\n').filter(Boolean);
    const line = lines.find((l) => l.includes('session_opened'))!;
    assert.deepEqual(JSON.parse(line), {
      stream: 'audit',
      time: JSON.parse(line).time,
      event: 'session_opened',
      outcome: 'ok',
      tenant: 't',
      sessionId: 's',
    });
  });

  it('a stdout whose reader went away (a closed pipe): the process goes on, and each event lost is counted', async () => {
    const child = stdoutAudit(10);
    child.stdout.destroy(); // the reader's end closed: every write gets EPIPE
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, err);
    assert.ok(Number(err.trim().split('\n').at(-1)) >= 9, `counted as not written: ${err}`);
  });
});
