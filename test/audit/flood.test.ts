// One tenant's volume against everyone else's audit trail, without Redis (the store in process
// memory): a flood of identical refusals is one event with a count, in the store and in the log; a
// flood of distinct events drops only that tenant's oldest, within a bound in bytes; memory stays
// bounded. Then the same over real sockets: one token refused again and again.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createAudit, type AuditInput, type AuditTrail } from '../../src/audit/index.js';
import { logger } from '../../src/telemetry/index.js';
import { memoryAfterGc } from '../support/gc.js';
import { endpointPath, openClient, refusal, startStack, type Stack } from '../support/stack.js';
import { until } from '../support/wait.js';

type Event = Record<string, any>;
const MIB = 1024 * 1024;
const API = 'flood-test-usage-api-token';
const DAY = { from: Date.now() - 86_400_000, to: Date.now() + 86_400_000 };

const lines = (file: string): Event[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);

/** Every event of `tenant`'s trail, a page at a time. */
async function trailOf(audit: AuditTrail, tenant: string): Promise<Event[]> {
  const all: Event[] = [];
  let cursor: string | undefined;
  do {
    const page = await audit.query({ tenant, ...DAY, limit: 1000, cursor });
    all.push(...page.events);
    cursor = page.next ?? undefined;
  } while (cursor);
  return all;
}

/** How many events `events` stand for: one each, or as many as its `count` says were folded into it. */
const standsFor = (events: Event[]): number => events.reduce((n, e) => n + (e.count ?? 1), 0);

describe('the in-process audit store under one tenant’s flood', () => {
  const genuine = (i: number): AuditInput => ({
    event: 'session_opened',
    outcome: 'ok',
    tenant: 'hospital-b',
    subject: 'dr-b',
    sessionId: `b-${i}`,
  });

  it('100,000 identical refusals of tenant A are one event with a count: tenant B keeps its 12', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-flood-')), 'audit.jsonl');
    const audit = await createAudit({ file, retentionDays: 1, trustedProxies: 0, logger, coalesceSeconds: 60 });
    for (let i = 0; i < 12; i++) audit.record(genuine(i));
    const refused: AuditInput = {
      event: 'upgrade_refused',
      outcome: 'refused',
      reason: 'unconfigured_limit',
      error: 'UNCONFIGURED_LIMIT',
      tenant: 'hospital-a',
      subject: 'browser-a',
      address: '203.0.113.5',
    };
    for (let i = 0; i < 100_500; i++) audit.record({ ...refused, interactionId: `i-${i}` });
    assert.equal((await trailOf(audit, 'hospital-b')).length, 12, "B's events are all there");
    await audit.close(); // writes the open summaries
    const flood = lines(file).filter((e) => e.tenant === 'hospital-a');
    assert.ok(flood.length <= 2, `${flood.length} lines for one refusal repeated`);
    assert.equal(standsFor(flood), 100_500, 'every refusal is counted');
    assert.equal(flood.at(-1)!.reason, 'unconfigured_limit');
  });

  it('API calls for 30,000 made-up tenants: the repeats past the bound are folded together, every call counted', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-flood-')), 'audit.jsonl');
    const audit = await createAudit({ file, retentionDays: 1, trustedProxies: 0, logger });
    const call = {
      event: 'usage_api_call' as const,
      outcome: 'ok',
      status: 200,
      path: '/v1/usage',
      caller: 'USAGE_API_TOKEN',
    };
    for (let i = 0; i < 30_000; i++) audit.record({ ...call, tenant: `made-up-${i}`, trail: 'existing' });
    await audit.close();
    const calls = lines(file).filter((e) => e.event === 'usage_api_call');
    assert.ok(calls.length <= 16_384 + 4, `${calls.length} lines for 30,000 calls`);
    assert.equal(standsFor(calls), 30_000);
  });

  it("120,000 distinct events of tenant A drop only A's oldest, within AUDIT_STORE_MAX_BYTES; memory stays bounded", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-flood-')), 'audit.jsonl');
    const before = (await memoryAfterGc()).heapUsed;
    const audit = await createAudit({ file, retentionDays: 1, trustedProxies: 0, logger, maxBytes: 4 * MIB });
    for (let i = 0; i < 12; i++) audit.record(genuine(i));
    for (let i = 0; i < 120_000; i++)
      audit.record({
        event: 'session_opened',
        outcome: 'ok',
        tenant: 'hospital-a',
        sessionId: `a-${i}-${'x'.repeat(40)}`,
      });
    const grown = (await memoryAfterGc()).heapUsed - before;
    const b = await trailOf(audit, 'hospital-b');
    const a = await trailOf(audit, 'hospital-a');
    await audit.close();
    assert.deepEqual(
      b.map((e) => e.sessionId),
      Array.from({ length: 12 }, (_, i) => `b-${i}`),
    );
    assert.ok(a.length > 1000 && a.length < 120_000, `A keeps its newest ${a.length}`);
    assert.equal(a.at(-1)!.sessionId, `a-119999-${'x'.repeat(40)}`);
    const kept = [...a, ...b].reduce((n, e) => n + JSON.stringify(e).length, 0);
    assert.ok(kept <= 4 * MIB, `${kept} bytes of events kept`);
    assert.ok(grown < 16 * MIB, `the heap grew by ${(grown / MIB).toFixed(1)} MiB`);
  });
});

describe('one browser token refused again and again, over real sockets', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      MAX_UNCONFIGURED_PER_TOKEN: '1',
      MAX_UNCONFIGURED_PER_SUBJECT: '1',
      AUDIT_COALESCE_SECONDS: '5',
      USAGE_API_TOKEN: API,
    });
  });
  afterAll(() => stack?.close());

  it('is a few lines with a count in the audit log, and leaves other tenants’ trails alone', async () => {
    const file = stack.gateway.config.AUDIT_LOG_FILE!;
    const other = await stack.connect('transcribe', { tenant: 'other' });
    other.ws.close();
    const token = await stack.token('openid transcribe', 'base');
    const url = `${stack.base}${endpointPath('transcribe')}?tenant-name=base&token=${encodeURIComponent(`Bearer ${token}`)}`;
    const held = await openClient(url); // its one socket without a config
    const n = 500;
    for (let i = 0; i < n; i += 250)
      await Promise.all(Array.from({ length: 250 }, () => refusal(url).then((r) => assert.equal(r.status, 429))));
    held.ws.close();
    const flood = () => lines(file).filter((e) => e.reason === 'unconfigured_limit');
    await until(() => standsFor(flood()) === n, 'every refusal counted in the log');
    assert.ok(flood().length <= 10, `${flood().length} lines for ${n} refusals`);
    assert.ok(flood().every((e) => e.tenant === 'base'));
    const trail = async (tenant: string) => {
      const q = new URLSearchParams({
        tenant,
        from: new Date(DAY.from).toISOString(),
        to: new Date(DAY.to).toISOString(),
      });
      const res = await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}/v1/audit?${q}`, {
        headers: { authorization: `Bearer ${API}` },
      });
      return ((await res.json()) as { events: Event[] }).events;
    };
    assert.deepEqual(
      (await trail('other')).map((e) => e.event),
      ['upgrade_accepted', 'session_opened', 'session_ended'],
      "the other tenant's trail",
    );
    const kept = (await trail('base')).filter((e) => e.reason === 'unconfigured_limit');
    assert.ok(kept.length <= 10 && standsFor(kept) === n, `${kept.length} events in base's trail for ${n} refusals`);
  });
});
