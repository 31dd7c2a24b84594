// Test support: the usage ledger in process, as its tests make it: options, temp journal dirs,
// Redis key prefixes, calls to its ops API.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { UsageApi, UsageOptions } from '../../src/usage/index.js';

const dirs: string[] = [];
process.once('exit', () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
/** A temp dir removed when the test process exits. */
export function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sg-usage-'));
  dirs.push(d);
  return d;
}

let n = 0;
/** A Redis key prefix of its own per test, so tests sharing one Redis do not see each other. */
export const uniquePrefix = (): string => `t${process.pid}-${++n}:`;

export const TOKEN = 'ops-secret-token';

/** token null: no Authorization header. */
export async function get(api: UsageApi, pathAndQuery: string, token: string | null = TOKEN) {
  const url = new URL(pathAndQuery, 'http://gateway');
  const res = await api.handle({
    method: 'GET',
    path: url.pathname,
    query: url.searchParams,
    authorization: token === null ? undefined : `Bearer ${token}`,
  });
  if (!res) throw new Error(`api did not handle ${pathAndQuery}`);
  return res as { status: number; body: any };
}

/** Options for createUsage(): a temp journal dir, 30 days kept, no session cap, TOKEN for the API,
 *  a 500 ms Redis connect timeout; `extra` on top (redis and keyPrefix for the Redis ledger). */
export const usageOptions = (extra: Partial<UsageOptions> = {}): UsageOptions => ({
  journalDir: extra.journalDir ?? tempDir(),
  retentionDays: 30,
  maxSessionsPerTenant: 0,
  apiToken: TOKEN,
  connectTimeoutMs: 500,
  ...extra,
});

/** The speech figures /v1/usage shows for a bucket or range where no session ended with its coverage. */
export const NO_SPEECH = { speechSeconds: 0, transcribedSpeechSeconds: 0, coverage: null } as const;
/** The coverage fields of a /v1/usage/sessions row without coverage (open, never live, or recorded before). */
export const NO_COVERAGE = {
  speechSeconds: null,
  transcribedSpeechSeconds: null,
  coverage: null,
  gaps: [],
  moreGaps: 0,
} as const;
