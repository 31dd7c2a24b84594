// The ops usage API: bearer auth, exact shapes, 400s, pagination; Redis and in-process answer alike.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { UsageHttpApi } from '../../src/usage/api.js';
import { createUsage, type Usage, type UsageApi } from '../../src/usage/index.js';
import { MemoryUsageStore } from '../../src/usage/memory-store.js';
import { NO_SPEECH, TOKEN, get, tempDir, uniquePrefix } from '../support/usage.js';
import { redisAndClusterForFile } from './redis-cluster.js';

const DAY = 86_400_000;
const D = Math.floor(Date.now() / DAY) * DAY - DAY; // yesterday 00:00 UTC
const FROM = new Date(D).toISOString();
const TO = new Date(D + DAY).toISOString();

const servers = redisAndClusterForFile();

/** 250 sessions of tenant acme, several sharing a start millisecond, in us, eu or (as recorded before
 * environments were) none; and one of tenant beta. */
async function seed(u: Usage): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const k = `s${String(i).padStart(3, '0')}`;
    const startedAt = D + 3_600_000 + Math.floor(i / 3) * 1000;
    const environment = [undefined, 'us', 'eu'][i % 3];
    u.ledger.sessionStarted({
      sessionKey: k,
      tenant: 'acme',
      endpoint: i % 2 ? 'streams' : 'transcribe',
      startedAt,
      ...(environment && { environment }),
    });
    u.ledger.recordUsage({ sessionKey: k, seq: 1, kind: 'delta', credits: 0.001, at: startedAt });
    if (i % 5) u.ledger.recordUsage({ sessionKey: k, seq: 2, kind: 'final', credits: 0.002, at: startedAt });
    u.ledger.sessionEnded({ sessionKey: k, outcome: 'ended', mediaSeconds: 0.5, endedAt: startedAt + 500 });
  }
  u.ledger.sessionStarted({ sessionKey: 'b1', tenant: 'beta', endpoint: 'transcribe', startedAt: D });
  await u.ledger.flush();
}

async function allPages(api: UsageApi, tenant: string): Promise<{ pages: number[]; keys: string[] }> {
  const pages: number[] = [];
  const keys: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await get(
      api,
      `/v1/usage/sessions?tenant=${tenant}&from=${FROM}&to=${TO}${cursor ? `&cursor=${cursor}` : ''}`,
    );
    assert.equal(res.status, 200);
    pages.push(res.body.sessions.length);
    keys.push(...res.body.sessions.map((s: { sessionKey: string }) => s.sessionKey));
    cursor = res.body.next;
  } while (cursor);
  return { pages, keys };
}

const modes = {
  redis: () =>
    createUsage({
      redis: { url: servers.redis.url },
      keyPrefix: uniquePrefix(),
      journalDir: tempDir(),
      retentionDays: 30,
      maxSessionsPerTenant: 0,
      apiToken: TOKEN,
    }),
  'redis cluster': () =>
    createUsage({
      redis: { clusterNodes: [{ host: '127.0.0.1', port: servers.cluster.ports[0] }] },
      keyPrefix: uniquePrefix(),
      journalDir: tempDir(),
      retentionDays: 30,
      maxSessionsPerTenant: 0,
      apiToken: TOKEN,
    }),
  'in-process': () =>
    createUsage({ journalDir: tempDir(), retentionDays: 30, maxSessionsPerTenant: 0, apiToken: TOKEN }),
};

for (const [mode, make] of Object.entries(modes)) {
  describe(`usage API (${mode})`, () => {
    let u: Usage;
    beforeAll(async () => {
      u = await make();
      await seed(u);
    });
    afterAll(async () => {
      await u.close();
    });

    test('refuses a missing or wrong token with 401 in the catalogue shape', async () => {
      for (const token of [null, 'wrong', `${TOKEN}x`, '']) {
        const res = await get(u.api, '/v1/tenants', token);
        assert.equal(res.status, 401);
        assert.equal(res.body.error.id, 'UNAUTHORIZED');
        assert.equal(res.body.error.status, 401);
      }
    });

    test('tenants', async () => {
      assert.deepEqual(await get(u.api, '/v1/tenants'), { status: 200, body: { tenants: ['acme', 'beta'] } });
    });

    test('usage totals and buckets', async () => {
      const res = await get(u.api, `/v1/usage?tenant=acme&from=${FROM}&to=${TO}&granularity=day`);
      // 200 sessions with a final 0.002, 50 estimated at 0.001: exactly 0.45.
      assert.deepEqual(res.body, {
        tenant: 'acme',
        from: FROM,
        to: TO,
        granularity: 'day',
        total: { credits: 0.45, sessions: 250, mediaSeconds: 125, ...NO_SPEECH },
        buckets: [{ start: FROM, credits: 0.45, sessions: 250, mediaSeconds: 125, ...NO_SPEECH }],
      });
      const streams = await get(u.api, `/v1/usage?tenant=acme&from=${FROM}&to=${TO}&granularity=hour&endpoint=streams`);
      assert.deepEqual(streams.body.total, { credits: 0.225, sessions: 125, mediaSeconds: 62.5, ...NO_SPEECH });
      assert.deepEqual(
        streams.body.buckets.map((b: { start: string }) => b.start),
        [new Date(D + 3_600_000).toISOString()],
      );
      const none = await get(u.api, `/v1/usage?tenant=nobody&from=${FROM}&to=${TO}&granularity=hour`);
      assert.deepEqual(none.body.total, { credits: 0, sessions: 0, mediaSeconds: 0, ...NO_SPEECH });
      assert.deepEqual(none.body.buckets, []);
    });

    test("a range off its granularity's edges answers the sessions in it, in buckets cut to the range", async () => {
      const at = (ms: number) => new Date(ms).toISOString();
      const usage = async (from: number, to: number, q = '') =>
        (await get(u.api, `/v1/usage?tenant=acme&from=${at(from)}&to=${at(to)}${q}`)).body;
      const H = 3_600_000;
      // Sessions 90 to 179 start in [01:00:30, 01:01:00): 18 estimated at 0.001, 72 at 0.002.
      const mid = { credits: 0.162, sessions: 90, mediaSeconds: 45, ...NO_SPEECH };
      const body = await usage(D + H + 30_000, D + H + 60_000); // granularity day, the default
      assert.deepEqual(body, {
        tenant: 'acme',
        from: at(D + H + 30_000),
        to: at(D + H + 60_000),
        granularity: 'day',
        total: mid,
        buckets: [{ start: at(D + H + 30_000), ...mid }],
      });
      assert.deepEqual((await usage(D + H + 30_000, D + H + 60_000, '&granularity=hour')).buckets, [
        { start: at(D + H + 30_000), ...mid },
      ]);
      // Odd sessions are /streams: 45 of them, 9 estimated.
      assert.deepEqual((await usage(D + H + 30_000, D + H + 60_000, '&endpoint=streams')).total, {
        credits: 0.081,
        sessions: 45,
        mediaSeconds: 22.5,
        ...NO_SPEECH,
      });
      // "The last hours" of a dashboard, by day and by hour: every session, in the buckets holding them.
      const all = { credits: 0.45, sessions: 250, mediaSeconds: 125, ...NO_SPEECH };
      const lastHours = await usage(D + H / 2, D + DAY + 5 * H);
      assert.deepEqual(lastHours.total, all);
      assert.deepEqual(lastHours.buckets, [{ start: at(D + H / 2), ...all }]);
      const byHour = await usage(D + H / 2, D + 2 * H + 1, '&granularity=hour');
      assert.deepEqual(byHour.buckets, [{ start: at(D + H), ...all }]);
      // From mid-hour to a day's end: the edge from the session records, the rest from the buckets.
      assert.deepEqual((await usage(D + H + 30_000, D + DAY)).total, {
        credits: 0.288,
        sessions: 160,
        mediaSeconds: 80,
        ...NO_SPEECH,
      });
    });

    test('sessions come in pages of 100 sorted by start, each exactly once', async () => {
      const { pages, keys } = await allPages(u.api, 'acme');
      assert.deepEqual(pages, [100, 100, 50]);
      assert.deepEqual(
        keys,
        Array.from({ length: 250 }, (_, i) => `s${String(i).padStart(3, '0')}`),
      );
      const first = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions[0];
      assert.deepEqual(Object.keys(first).sort(), [
        'coverage',
        'credits',
        'end',
        'endpoint',
        'environment',
        'estimated',
        'gaps',
        'interactionId',
        'mediaSeconds',
        'moreGaps',
        'outcome',
        'segments',
        'sessionKey',
        'speechSeconds',
        'start',
        'tenant',
        'transcribedSpeechSeconds',
        'upstreamSessionId',
      ]);
      assert.equal(first.estimated, true); // s000: no final
      assert.equal(first.credits, 0.001);
      const rows = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions.slice(0, 3);
      assert.deepEqual(
        rows.map((r: { environment: string | null }) => r.environment),
        [null, 'us', 'eu'],
        'the environment each started in; none (an older row): null',
      );
    });

    test('bad parameters get 400 with a reason', async () => {
      const bad = [
        `/v1/usage?from=${FROM}&to=${TO}`,
        `/v1/usage?tenant=acme&to=${TO}`,
        `/v1/usage?tenant=acme&from=yesterday&to=${TO}`,
        `/v1/usage?tenant=acme&from=2025-01-01T10:00:00&to=${TO}`, // no offset: the host's time zone would decide
        `/v1/usage?tenant=acme&from=2025-02-30&to=${TO}`, // no such day (not rolled over to March 2)
        `/v1/usage?tenant=acme&from=2025-01-01T24:00:00Z&to=${TO}`,
        `/v1/usage?tenant=acme&from=${TO}&to=${FROM}`,
        `/v1/usage?tenant=acme&from=${FROM}&to=${TO}&granularity=week`,
        `/v1/usage?tenant=acme&from=${FROM}&to=${TO}&endpoint=rest`,
        '/v1/usage/sessions',
        '/v1/usage/sessions?tenant=acme&cursor=not-a-cursor',
      ];
      for (const path of bad) {
        const res = await get(u.api, path);
        assert.equal(res.status, 400, path);
        assert.equal(res.body.type, 'error');
        assert.equal(res.body.error.id, 'BAD_REQUEST');
        assert.ok(res.body.error.details.length > 0);
      }
    });

    test('other paths are not the API’s; other methods are refused', async () => {
      assert.equal(await u.api.handle({ method: 'GET', path: '/v1/other', query: new URLSearchParams() }), null);
      assert.equal(await u.api.handle({ method: 'GET', path: '/metrics', query: new URLSearchParams() }), null);
      const post = await u.api.handle({
        method: 'POST',
        path: '/v1/tenants',
        query: new URLSearchParams(),
        authorization: `Bearer ${TOKEN}`,
      });
      assert.equal(post?.status, 405);
    });
  });
}

test('Redis and in-process ledgers answer the same', async () => {
  const [r, m] = await Promise.all([modes.redis(), modes['in-process']()]);
  await Promise.all([seed(r), seed(m)]);
  for (const path of [
    `/v1/usage?tenant=acme&from=${FROM}&to=${TO}&granularity=hour`,
    `/v1/usage/sessions?tenant=acme&from=${FROM}&to=${TO}`,
    '/v1/tenants',
  ]) {
    assert.deepEqual(await get(r.api, path), await get(m.api, path), path);
  }
  await Promise.all([r.close(), m.close()]);
});

test('without USAGE_API_TOKEN every request is refused, saying why', async () => {
  const u = await createUsage({ journalDir: tempDir(), retentionDays: 30, maxSessionsPerTenant: 0 });
  const res = await get(u.api, '/v1/tenants', 'anything');
  assert.equal(res.status, 401);
  assert.match(res.body.error.details, /USAGE_API_TOKEN is not set/);
  await u.close();
});

describe('tenant-scoped usage API tokens', () => {
  const SCOPED = 'scoped-token-reads-beta-only';
  let u: Usage;
  const audited: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    u = await createUsage({
      journalDir: tempDir(),
      retentionDays: 30,
      maxSessionsPerTenant: 0,
      apiToken: TOKEN,
      apiTokens: JSON.stringify({ dash: { token: SCOPED, tenants: ['beta'] } }),
      audit: {
        record: (e) => void audited.push(e),
        query: () => Promise.resolve({ events: [], next: null }),
      },
    });
    await seed(u);
  });
  afterAll(() => u.close());

  test('reads its own tenants; another is 403 USAGE_TENANT_FORBIDDEN; /v1/tenants lists only its own', async () => {
    const own = await get(u.api, `/v1/usage?tenant=beta&from=${FROM}&to=${TO}`, SCOPED);
    assert.equal(own.status, 200);
    for (const path of ['/v1/usage', '/v1/usage/sessions', '/v1/audit']) {
      const res = await get(u.api, `${path}?tenant=acme&from=${FROM}&to=${TO}`, SCOPED);
      assert.equal(res.status, 403, path);
      assert.equal(res.body.error.id, 'USAGE_TENANT_FORBIDDEN');
    }
    assert.deepEqual((await get(u.api, '/v1/tenants', SCOPED)).body, { tenants: ['beta'] });
    assert.deepEqual((await get(u.api, '/v1/tenants')).body, { tenants: ['acme', 'beta'] }, 'USAGE_API_TOKEN: all');
  });

  test("each call is audited by the token name, never the token; a forbidden one under the caller's tenants, an unknown caller's under none", async () => {
    audited.length = 0;
    await get(u.api, `/v1/usage/sessions?tenant=acme`, SCOPED);
    await get(u.api, `/v1/usage/sessions?tenant=acme`, 'not-a-token');
    assert.deepEqual(
      audited.map((e) => [e.caller, e.tenant, e.asked, e.status, e.error]),
      [
        ['dash', 'beta', 'acme', 403, 'USAGE_TENANT_FORBIDDEN'],
        [undefined, undefined, undefined, 401, 'UNAUTHORIZED'],
      ],
    );
    assert.ok(!JSON.stringify(audited).includes(SCOPED) && !JSON.stringify(audited).includes('not-a-token'));
  });

  test('an audit store that cannot be read: 503 AUDIT_STORE_UNAVAILABLE; a cursor it did not give: 400', async () => {
    const store = { record: () => undefined, query: () => Promise.reject(new Error('redis away')) };
    const api = new UsageHttpApi(new MemoryUsageStore(DAY, Date.now), TOKEN, store);
    const res = await get(api, `/v1/audit?tenant=acme&from=${FROM}&to=${TO}`);
    assert.equal(res.status, 503);
    assert.equal(res.body.error.id, 'AUDIT_STORE_UNAVAILABLE');
    store.query = () => Promise.reject(new RangeError('cursor is not a cursor this API returned'));
    assert.equal((await get(api, `/v1/audit?tenant=acme&from=${FROM}&to=${TO}&cursor=x`)).status, 400);
  });

  test('USAGE_API_TOKENS_FILE: the same list from a file (a mounted Secret)', async () => {
    const file = join(tempDir(), 'tokens.json');
    writeFileSync(file, JSON.stringify({ filed: { token: 'token-from-a-mounted-file', tenants: ['acme'] } }));
    const f = await createUsage({
      journalDir: tempDir(),
      retentionDays: 30,
      maxSessionsPerTenant: 0,
      apiTokensFile: file,
    });
    assert.equal((await get(f.api, `/v1/usage/sessions?tenant=acme`, 'token-from-a-mounted-file')).status, 200);
    assert.equal((await get(f.api, `/v1/usage/sessions?tenant=beta`, 'token-from-a-mounted-file')).status, 403);
    await f.close();
  });

  test('a bad token list stops the start, naming the variable and the token, never its value', async () => {
    const bad = [
      ['not json', /USAGE_API_TOKENS is not JSON/],
      [JSON.stringify({ dash: { token: 'short', tenants: ['a'] } }), /"dash" needs a token of at least 16/],
      [JSON.stringify({ dash: { token: 'long-enough-token-value', tenants: [] } }), /"dash" needs "tenants"/],
    ] as const;
    for (const [apiTokens, message] of bad) {
      const made = createUsage({ journalDir: tempDir(), retentionDays: 30, maxSessionsPerTenant: 0, apiTokens });
      await assert.rejects(made, (err: Error) => message.test(err.message) && !err.message.includes('long-enough'));
    }
  });
});
