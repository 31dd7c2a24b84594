// The HTTP surfaces (the gateway's admin port) under autocannon while the sessions hold: /metrics, then /v1/usage, each for
// half the hold window, ten connections; autocannon runs as its own process (its CPU is not the
// gateway's, and the load generator's timers are not delayed by it).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../../../node_modules/autocannon/autocannon.js', import.meta.url));

export interface HttpResult {
  path: string;
  requestsPerS: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** The figures read from autocannon's JSON report (-j). */
interface CannonResult {
  requests: { average: number };
  latency: { p99: number };
  non2xx: number;
  errors: number;
}

function cannon(url: string, seconds: number, headers: string[]): Promise<CannonResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [bin, '-j', '-c', '10', '-d', String(seconds), ...headers.flatMap((h) => ['-H', h]), url],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`autocannon exited ${code}`)),
    );
  });
}

export async function hitHttp(adminPort: number, holdFrom: number, stopAt: number): Promise<HttpResult[]> {
  await new Promise((r) => setTimeout(r, Math.max(0, holdFrom - Date.now())));
  const seconds = Math.max(1, Math.floor((stopAt - holdFrom) / 2000));
  const out: HttpResult[] = [];
  const day = new Date().toISOString().slice(0, 10);
  const usage = `/v1/usage?tenant=base&from=${day}T00:00:00Z&to=${day}T23:59:59Z&granularity=hour`;
  for (const [path, headers] of [
    ['/metrics', []],
    [usage, ['Authorization=Bearer bench-usage-token']],
  ] as const) {
    const r = await cannon(`http://127.0.0.1:${adminPort}${path}`, seconds, [...headers]);
    out.push({
      path: path.split('?')[0],
      requestsPerS: r.requests.average,
      p99Ms: r.latency.p99,
      non2xx: r.non2xx,
      errors: r.errors,
    });
  }
  return out;
}
