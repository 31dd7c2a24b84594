// The Grafana dashboard and the alert rules, checked by a real Prometheus scraping a live gateway
// (with Redis) while sessions pass: every panel query parses and shows data, every metric the
// alerts use exists, and promtool accepts the rules and their unit tests. Each alert reads only
// the gateway's job, keeps namespace and job apart, links its runbook in docs/operations.md, and
// has unit tests where it fires and where it does not.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse } from 'yaml';
import { chromeChunks, evenChunks, fixture } from '../support/fixtures.js';
import { configured, englishConfiguration, startStack, type Stack, type TestClient } from '../support/stack.js';
import { metricsTarget } from '../support/metrics.js';
import { usageTotalAt } from '../support/usage-api.js';
import { delay } from '../support/wait.js';
import { startRedis, type TestRedis } from '../usage/redis.js';
import { dashboardQueries, panelQuery } from './dashboard.js';
import { PROMTOOL, startPrometheus, type TestPrometheus } from './prom-server.js';

const JOB = 'speech-gateway';
const ALERTS = 'grafana/alerts.yaml';
const ALERT_TESTS = 'grafana/alerts.test.yaml';
const GUIDE = 'docs/operations.md';
/** The job matcher every selector in the rules carries (the chart's PodMonitor job holds the release's full name). */
const JOB_MATCHER = 'job=~".*speech-gateway.*"';
const run = promisify(execFile);
const CREDITS_PANEL = 'Credits per tenant';
const COVERAGE_PANEL = 'Transcript coverage per tenant';
const USAGE_TOKEN = 'test-usage-token';
const HOUR = 3_600_000;
/** The start of the UTC hour holding `ms`: the usage API's hour buckets' edges. */
const hourOf = (ms: number): number => ms - (ms % HOUR);

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

interface AlertRule {
  alert: string;
  expr: string;
  annotations?: Record<string, string>;
}

const alertRules = (): AlertRule[] =>
  (parse(readFileSync(ALERTS, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> }).groups.flatMap((g) => g.rules);

/** GitHub's heading anchors of a Markdown file's headings outside code blocks: lower case, every
 * character but letters, digits, `_`, `-` and space dropped, each space one `-`, repeats suffixed -1, -2. */
function markdownAnchors(md: string): Set<string> {
  const seen = new Set<string>();
  const text = md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const [, heading] of text.matchAll(/^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/gm)) {
    const base = heading
      .toLowerCase()
      .replace(/[^a-z0-9 _-]/g, '')
      .replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; seen.has(anchor); n++) anchor = `${base}-${n}`;
    seen.add(anchor);
  }
  return seen;
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
  let firstSession: number;

  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({
      REDIS_URL: redis.url,
      USAGE_API_TOKEN: USAGE_TOKEN,
      MAX_SESSIONS_PER_TENANT: '3',
      CONFIG_TIMEOUT_MS: '300',
      PACE: '4',
    });
    firstSession = Date.now();
    instance = metricsTarget(stack.gateway.server.adminPort);
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
    assert.equal((await fetch(`http://127.0.0.1:${stack.gateway.server.port}/no-such-path`)).status, 404);
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
    // The credits panel shows each tenant's credits in the range, exactly the usage API's total for
    // the hours the sessions started in (every session here started and ended in the last 5 minutes).
    const hours = { from: hourOf(firstSession), to: hourOf(Date.now()) + HOUR };
    const api = new Map<string, number>();
    for (const tenant of ['base', 'clinic-b'])
      api.set(tenant, await usageTotalAt(stack.gateway.server.adminPort, USAGE_TOKEN, { tenant, ...hours }));
    await prom.scrapedAfter(JOB, Date.now()); // after the ledger wrote the last session's figures
    const shown = new Map(
      (await prom.query(fillVariables(panelQuery(CREDITS_PANEL), instance))).map((s) => [
        s.metric.tenant,
        Number(s.value[1]),
      ]),
    );
    assert.deepEqual([...shown.keys()].sort(), ['base', 'clinic-b']);
    for (const [tenant, credits] of api) {
      assert.ok(credits > 0, `${tenant}: credits in the usage API`);
      assert.ok(Math.abs(shown.get(tenant)! - credits) < 1e-9, `${tenant}: panel ${shown.get(tenant)}, API ${credits}`);
    }
    // The emulator transcribes every stretch the gateway's detector hears: the late session's speech,
    // counted after the tenant's series existed, is covered (a replay after the upstream crash too).
    const coverage = await prom.query(fillVariables(panelQuery(COVERAGE_PANEL), instance));
    const late = coverage.find((c) => c.metric.tenant === 'clinic-b');
    assert.ok(late && Number(late.value[1]) >= 0.9 && Number(late.value[1]) <= 1, JSON.stringify(coverage));
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

  it("the credits panel counts what a replaced pod recorded after its last scrape: the ledger's totals rose 16 in the range", async () => {
    const expr = panelQuery(CREDITS_PANEL)
      .replaceAll('$__range', '1h')
      .replaceAll('$instance', 'gw-.*')
      .replaceAll('$tenant', 'acme');
    // Both pods read the ledger's totals in the one Redis: 2 credits from before the range, 12 by
    // 20m. gw-0 drains at 30m and records its handed-over segment's last credit after its last
    // scrape; gw-1, from 31m, reads 13 and the takeover's 5 more: 18 - 2 in the range.
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
                series: 'speech_gateway_ledger_credits{tenant="acme",instance="gw-0",job="gw"}',
                values: '2+0.5x20 12x9',
              },
              {
                series: 'speech_gateway_ledger_credits{tenant="acme",instance="gw-1",job="gw"}',
                values: '_x31 13+0.25x20 18x8',
              },
            ],
            promql_expr_test: [{ expr, eval_time: '60m', exp_samples: [{ labels: '{tenant="acme"}', value: 16 }] }],
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
    const unit = await run(PROMTOOL, ['test', 'rules', ALERT_TESTS]).catch(
      (err: { stdout?: string; stderr?: string }) => {
        throw new Error(`${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );
    assert.match(unit.stdout, /SUCCESS/);
  });

  it('every alert has unit tests where it fires and where it does not', () => {
    const tests = (
      parse(readFileSync(ALERT_TESTS, 'utf8')) as {
        tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
      }
    ).tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const { alert } of alertRules()) {
      const cases = tests.filter((t) => t.alertname === alert);
      assert.ok(
        cases.some((t) => (t.exp_alerts ?? []).length > 0),
        `${alert}: no unit test where it fires`,
      );
      assert.ok(
        cases.some((t) => (t.exp_alerts ?? []).length === 0),
        `${alert}: no unit test where it stays quiet`,
      );
    }
  });

  it('the target-down alert watches the gateway job: up == 0 for minutes, and absent() when no target is left', () => {
    const down = alertRules().find((r) => r.alert === 'SpeechGatewayDown');
    assert.ok(down, 'SpeechGatewayDown is in the rules');
    assert.match(down.expr, /\bup\{job=~"\.\*speech-gateway\.\*"\} == 0/);
    assert.match(down.expr, /\babsent\(up\{job=~"\.\*speech-gateway\.\*"\}\)/);
  });

  it('every alert reads only the gateway job and keeps namespace and job apart', () => {
    for (const { alert, expr } of alertRules()) {
      // Every series selector (a metric name with or without braces; not a function call or a
      // `by (...)` list) carries the job matcher.
      const selectors = [
        ...expr.matchAll(/\b(up|(?:speech_gateway|nodejs)_[a-z0-9_]+)\b(\{[^}]*\})?/g),
      ] as RegExpMatchArray[];
      assert.ok(selectors.length > 0, `${alert}: no selector found in ${expr}`);
      for (const [selector, , braces] of selectors)
        assert.ok(braces?.includes(JOB_MATCHER), `${alert}: ${selector} is not scoped by ${JOB_MATCHER}`);
      // Every aggregation keeps namespace and job (an unaggregated series keeps all its labels).
      for (const [aggregation, labels] of expr.matchAll(
        /\b(?:sum|max|min|avg|count)\b\s*(?:by\s*\(([^)]*)\))?\s*\(/g,
      )) {
        const kept = (labels ?? '').split(',').map((l) => l.trim());
        assert.ok(
          kept.includes('namespace') && kept.includes('job'),
          `${alert}: "${aggregation.trim()}" drops namespace or job`,
        );
      }
      // Matching across two aggregations names them too.
      for (const [matching, labels] of expr.matchAll(/\bon\s*\(([^)]*)\)/g)) {
        const kept = labels.split(',').map((l) => l.trim());
        assert.ok(
          kept.includes('namespace') && kept.includes('job'),
          `${alert}: "${matching}" ignores namespace or job`,
        );
      }
    }
  });

  it("every alert links its runbook: docs/operations.md#<anchor>, a heading of the guide's Alerts section", () => {
    const guide = readFileSync(GUIDE, 'utf8');
    const section = guide.split(/^## Alerts$/m)[1];
    assert.ok(section, `${GUIDE} has an Alerts section`);
    const all = markdownAnchors(guide);
    const inAlerts = markdownAnchors(section);
    const rules = alertRules();
    assert.ok(rules.length >= 11, `alerts found: ${rules.length}`);
    for (const { alert, annotations } of rules) {
      const url = annotations?.runbook_url;
      assert.ok(url, `${alert} has no runbook_url`);
      const [path, anchor] = url.split('#');
      assert.equal(path, GUIDE, `${alert}: the runbook is in ${GUIDE}`);
      assert.equal(anchor, alert.toLowerCase(), `${alert}: the runbook anchor is the alert's heading`);
      assert.ok(
        all.has(anchor) && inAlerts.has(anchor),
        `${alert}: no heading with anchor #${anchor} in ${GUIDE}'s Alerts section`,
      );
    }
  });
});
