// The Grafana dashboard and the alert rules, checked by a real Prometheus scraping a live gateway
// (with Redis) while sessions pass: every panel query parses and shows data, every metric the
// alerts use exists, and promtool accepts the rules and their unit tests.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';
import { configured, englishConfiguration, startStack, type Stack, type TestClient } from '../support/stack.js';
import { metrics } from '../../src/telemetry/index.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';
import { PROMTOOL, startPrometheus, type TestPrometheus } from './prom-server.js';

const JOB = 'speech-gateway';
const DASHBOARD = 'grafana/dashboards/speech-gateway.json';
const ALERTS = 'grafana/alerts.yaml';
const run = promisify(execFile);

interface Panel {
  title: string;
  type: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}

/** Every query target of the dashboard, rows' nested panels included. */
function dashboardQueries(): Array<{ panel: string; expr: string }> {
  const panels: Panel[] = JSON.parse(readFileSync(DASHBOARD, 'utf8')).panels;
  return panels
    .flatMap((p) => [p, ...(p.panels ?? [])])
    .flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
}

/** Grafana's variables as Grafana would fill them in for this gateway over the last few minutes. */
function fillVariables(expr: string, instance: string): string {
  const filled = expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__range', '5m')
    .replaceAll('$instance', instance.replaceAll('.', '\\\\.'))
    .replaceAll('$tenant', 'base|clinic-b');
  assert.doesNotMatch(filled, /\$/, `a variable the test does not know: ${filled}`);
  return filled;
}

async function dictation(stack: Stack, endpoint: 'transcribe' | 'streams', tenant: string): Promise<TestClient> {
  const c = await stack.connect(endpoint, { tenant });
  await configured(
    c,
    englishConfiguration(endpoint, endpoint === 'transcribe' ? 'audio/ogg' : 'audio/webm;codecs=opus'),
  );
  return c;
}

async function stream(c: TestClient, chunks: Buffer[]) {
  for (const chunk of chunks) {
    c.send(chunk);
    await delay(25);
  }
}

describe('Grafana dashboard and alert rules against a real Prometheus', () => {
  let redis: TestRedis;
  let stack: Stack;
  let prom: TestPrometheus;
  let instance: string;

  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({
      REDIS_URL: redis.url,
      USAGE_API_TOKEN: 'test-usage-token',
      MAX_SESSIONS_PER_TENANT: '3',
      CONFIG_TIMEOUT_MS: '300',
      PACE: '4',
    });
    instance = `127.0.0.1:${stack.gateway.server.port}`;
    prom = await startPrometheus({ job: JOB, targets: [instance], ruleFiles: [`${process.cwd()}/${ALERTS}`] });
    await prom.scrapedAfter(JOB, Date.now());

    // Traffic an operator would see: three dictations for one tenant (its cap) and one for
    // another, the upstream lost mid-stream (replaced), a flush, a fourth session refused at the
    // cap, a bad token, a wrong path, a client that never sends its config.
    const clients = await Promise.all([
      dictation(stack, 'transcribe', 'base'),
      dictation(stack, 'transcribe', 'base'),
      dictation(stack, 'streams', 'base'),
      dictation(stack, 'streams', 'clinic-b'),
    ]);
    const atCap = await stack.connect('transcribe', { tenant: 'base' }).then(
      () => 0,
      (e: { status?: number }) => e.status,
    );
    assert.equal(atCap, 429, 'a fourth session for tenant base is refused at the cap');
    // The tenants' credit series exist at 0 from their first session; one scrape sees them so before
    // any credit is counted, as with real sessions, which last minutes, not these fast few seconds.
    await prom.scrapedAfter(JOB, Date.now());
    const badToken = await stack.connect('transcribe', { token: 'not-a-jwt' }).then(
      () => 0,
      (e: { status?: number }) => e.status,
    );
    assert.equal(badToken, 401);
    assert.equal((await fetch(`http://${instance}/no-such-path`)).status, 404);
    const silent = await stack.connect('transcribe', { tenant: 'clinic-b' });

    const ogg = evenChunks(fixture('dictation.ogg'), 8000);
    const webm = chromeChunks('webm-opus');
    const streaming = clients.map((c, i) => stream(c, i < 2 ? ogg : webm));
    await delay(600);
    stack.emulator.dropAllSessions(); // the upstream crashes; the gateway replaces it
    await Promise.all(streaming);
    clients[0].sendJson({ type: 'flush' });
    await clients[0].next('flushed', 30_000);
    for (const c of clients) c.sendJson({ type: 'end' });
    await Promise.all(clients.map((c, i) => c.next(i < 2 ? 'ended' : 'ENDED', 30_000)));
    await silent.closed;
    for (const c of clients) await c.closed;
    // Sessions keep coming: a later one moves the counters and histograms the first wave created
    // (a series first scraped with its value has no rate yet).
    await prom.scrapedAfter(JOB, Date.now());
    const late = await dictation(stack, 'streams', 'clinic-b');
    await stream(late, webm);
    late.sendJson({ type: 'end' });
    await late.next('ENDED', 30_000);
    await late.closed;
    await prom.scrapedAfter(JOB, Date.now());
  }, 120_000);

  afterAll(async () => {
    await prom?.stop();
    await stack?.close();
    await redis?.stop();
  });

  it('every dashboard query parses and returns data for this gateway', async () => {
    const queries = dashboardQueries();
    assert.ok(queries.length >= 15, `the dashboard has its queries (${queries.length})`);
    const empty: string[] = [];
    for (const { panel, expr } of queries) {
      const result = await prom.query(fillVariables(expr, instance));
      // A quantile over no observations is NaN: data means at least one real number.
      if (!result.some((s) => Number.isFinite(Number(s.value[1]))))
        empty.push(`${panel}: ${expr} -> ${JSON.stringify(result)}`);
    }
    assert.deepEqual(empty, [], 'panels without data');
  });

  it('the panels show what happened: refusals by reason, upstream losses, credits per tenant, Redis up', async () => {
    const labels = async (expr: string, label: string) =>
      (await prom.query(expr))
        .filter((s) => Number(s.value[1]) > 0)
        .map((s) => s.metric[label])
        .sort();
    const refused = await labels('sum by (reason) (speech_gateway_refusals_total)', 'reason');
    for (const reason of ['not_found', 'tenant_limit']) assert.ok(refused.includes(reason), `${reason} in ${refused}`);
    assert.equal(refused.length, 3, `a reason for the bad token too: ${refused}`);
    assert.ok(
      (await labels('sum by (cause) (speech_gateway_upstream_failures_total)', 'cause')).length > 0,
      'upstream losses counted',
    );
    assert.deepEqual(await labels('sum by (result) (speech_gateway_upstream_reconnect_results_total)', 'result'), [
      'ok',
    ]);
    // The credits panel shows each tenant's credits in the range: all of them, first sessions included.
    const panel = dashboardQueries().find((q) => q.panel === 'Credits per tenant')!;
    // increase() extrapolates to the range's end, up to a scrape interval (1 s here) past the last
    // sample: over the few seconds these series have, that is up to 10%. A missed first session would be a third.
    const shown = new Map(
      (await prom.query(fillVariables(panel.expr, instance))).map((s) => [s.metric.tenant, Number(s.value[1])]),
    );
    const counted = new Map<string, number>();
    for (const { labels: l, value } of (await metrics.credits.get()).values)
      counted.set(String(l.tenant), (counted.get(String(l.tenant)) ?? 0) + value);
    assert.deepEqual([...shown.keys()].sort(), [...counted.keys()].sort());
    for (const [tenant, credits] of counted) {
      assert.ok(
        Math.abs(shown.get(tenant)! - credits) <= 0.15 * credits,
        `${tenant}: panel ${shown.get(tenant)}, counted ${credits}`,
      );
    }
    assert.deepEqual([...counted.keys()].sort(), ['base', 'clinic-b']);
    assert.deepEqual(await labels('sum by (outcome) (speech_gateway_sessions_total)', 'outcome'), [
      'config_timeout',
      'ended',
    ]);
    assert.deepEqual(
      (await prom.query('speech_gateway_redis_up')).map((s) => s.value[1]),
      ['1'],
    );
    assert.deepEqual(
      (await prom.query('speech_gateway_tenant_session_cap')).map((s) => s.value[1]),
      ['3'],
    );
  });

  it('the alert rules load into Prometheus, use only scraped metrics, and only the tenant cap refusal fires', async () => {
    const rules = (await (await fetch(`${prom.url}/api/v1/rules`)).json()) as {
      data: { groups: Array<{ rules: Array<{ name: string; health: string; state: string; lastError?: string }> }> };
    };
    const loaded = rules.data.groups.flatMap((g) => g.rules);
    assert.ok(loaded.length >= 5, `rules loaded: ${loaded.length}`);
    for (const r of loaded) assert.equal(r.health, 'ok', `${r.name}: ${r.lastError}`);
    // The traffic hit tenant base's cap (refused at once); the rest wait out their `for`, if anything.
    assert.deepEqual(
      loaded.filter((r) => r.state === 'firing').map((r) => r.name),
      ['SpeechGatewayTenantSessionsRefused'],
    );
    const names = new Set(readFileSync(ALERTS, 'utf8').match(/\b(speech_gateway|nodejs)_[a-z0-9_]+/g));
    for (const name of names) assert.ok((await prom.query(`group(${name})`)).length, `${name} is scraped`);
  });

  it('the credits panel counts a pod a rolling update replaced: 10 + 5 credits in the range show as 15 (not 5)', async () => {
    const panel = dashboardQueries().find((q) => q.panel === 'Credits per tenant')!;
    const expr = panel.expr.replaceAll('$__range', '1h').replaceAll('$instance', 'gw-.*').replaceAll('$tenant', 'acme');
    // gw-0 counts 10 credits over 20 minutes and is replaced at 30m; gw-1 starts at 31m and counts 5.
    const dir = mkdtempSync(join(tmpdir(), 'sgw-promtool-'));
    const file = join(dir, 'credits-panel.test.yaml');
    writeFileSync(
      file,
      JSON.stringify({
        rule_files: [],
        evaluation_interval: '1m',
        tests: [
          {
            interval: '1m',
            input_series: [
              {
                series: 'speech_gateway_credits_total{tenant="acme",endpoint="transcribe",instance="gw-0",job="gw"}',
                values: '0+0.5x20 10x10',
              },
              {
                series: 'speech_gateway_credits_total{tenant="acme",endpoint="transcribe",instance="gw-1",job="gw"}',
                values: '_x31 0+0.25x20 5x8',
              },
            ],
            // increase() extrapolates a little past gw-0's last sample: the figure is 15.2, shown rounded.
            promql_expr_test: [
              { expr: `round(${expr})`, eval_time: '60m', exp_samples: [{ labels: '{tenant="acme"}', value: 15 }] },
            ],
          },
        ],
      }),
    );
    try {
      const unit = await run(PROMTOOL, ['test', 'rules', file]).catch((err: { stdout?: string; stderr?: string }) => {
        throw new Error(`${err.stdout ?? ''}${err.stderr ?? ''}`);
      });
      assert.match(unit.stdout, /SUCCESS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('promtool checks the rules and passes their unit tests', async () => {
    const check = await run(PROMTOOL, ['check', 'rules', ALERTS]);
    assert.match(check.stdout, /SUCCESS: \d+ rules found/);
    const unit = await run(PROMTOOL, ['test', 'rules', 'grafana/alerts.test.yaml']);
    assert.match(unit.stdout, /SUCCESS/);
  });
});
