// Test helper: a real Prometheus (Debian's /usr/bin/prometheus) on a free loopback port, scraping
// the given targets every second, with its data in a temp dir. It inherits the test run's
// environment (SGW_TEST_RUN), so the global teardown kills it if afterAll does not.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/ports.js';
import { delay } from '../support/wait.js';

export const PROMETHEUS = '/usr/bin/prometheus';
export const PROMTOOL = '/usr/bin/promtool';

/** One sample of an instant vector: labels and [unix seconds, value as text]. */
export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface TestPrometheus {
  url: string;
  /** Instant query through /api/v1/query, at `atMs` (a Date.now(); default now); throws with
   *  Prometheus's error when it does not parse. */
  query(expr: string, atMs?: number): Promise<Sample[]>;
  /** Resolves once every target of the job has been scraped after `sinceMs` (a Date.now()). */
  scrapedAfter(job: string, sinceMs: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Starts Prometheus and waits for /-/ready. `ruleFiles` are loaded as its rule_files. */
export async function startPrometheus(o: {
  job: string;
  targets: string[];
  ruleFiles?: string[];
}): Promise<TestPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'sgw-prometheus-'));
  const config = join(dir, 'prometheus.yml');
  // JSON is YAML: no YAML writer needed.
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: o.ruleFiles ?? [],
      scrape_configs: [{ job_name: o.job, static_configs: [{ targets: o.targets }] }],
    }),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = '';
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr!.on('data', (b: Buffer) => (log = (log + b.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const kill = () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL');
  process.once('exit', kill);

  const stop = async () => {
    kill();
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}): ${log}`);
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > 150) {
      await stop();
      throw new Error(`prometheus not ready in 15 s: ${log}`);
    }
    await delay(100);
  }

  async function query(expr: string, atMs?: number): Promise<Sample[]> {
    const form = new URLSearchParams({ query: expr });
    if (atMs !== undefined) form.set('time', String(atMs / 1000));
    const res = await fetch(`${url}/api/v1/query`, { method: 'POST', body: form });
    const body = (await res.json()) as {
      status: string;
      error?: string;
      data?: { resultType: string; result: Sample[] };
    };
    if (body.status !== 'success') throw new Error(`${expr}: ${body.error}`);
    if (body.data!.resultType !== 'vector')
      throw new Error(`${expr}: a ${body.data!.resultType}, not an instant vector`);
    return body.data!.result;
  }

  return {
    url,
    query,
    async scrapedAfter(job, sinceMs, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // timestamp() gives the scrape's time only applied to a selector (of an expression: now).
        const [at, up] = await Promise.all([query(`timestamp(up{job="${job}"})`), query(`up{job="${job}"}`)]);
        const done =
          at.length > 0 && at.every((s) => Number(s.value[1]) * 1000 > sinceMs) && up.every((s) => s.value[1] === '1');
        if (done) return;
        if (Date.now() > deadline)
          throw new Error(`no good scrape of ${job} after ${new Date(sinceMs).toISOString()}: ${JSON.stringify(up)}`);
        await delay(200);
      }
    },
    stop,
  };
}
