// Test support: reads a gateway's ledger through its ops usage API, as an operator would.
import type { Stack } from './stack.js';
import { delay } from './wait.js';

export interface LedgerSession {
  sessionKey: string;
  tenant: string;
  environment: string | null;
  end: string | null;
  credits: number;
  estimated: boolean;
  outcome: string | null;
  segments: Array<{ upstreamSessionId: string | null; credits: number; estimated: boolean }>;
}

/** The URL of the ops usage API's `pathAndQuery` (`/v1/...`) on the gateway (or replica) whose admin
 *  port is `port`. Every test reaches /v1 through it. */
export function usageApiUrl(port: number, pathAndQuery: string): string {
  return `http://127.0.0.1:${port}${pathAndQuery}`;
}

/** GET `pathAndQuery` of the usage API with the bearer `apiToken`: its JSON body, or a throw unless 200. */
async function usageApiGet<T>(port: number, apiToken: string, pathAndQuery: string): Promise<T> {
  const res = await fetch(usageApiUrl(port, pathAndQuery), { headers: { authorization: `Bearer ${apiToken}` } });
  if (res.status !== 200) throw new Error(`usage API answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

/** GET /v1/usage: the tenant's total credits over [from, to) (ms, on `granularity` bucket edges). */
export async function usageTotalAt(
  port: number,
  apiToken: string,
  o: { tenant: string; from: number; to: number; granularity?: 'hour' | 'day' },
): Promise<number> {
  const range = `from=${new Date(o.from).toISOString()}&to=${new Date(o.to).toISOString()}`;
  const query = `/v1/usage?tenant=${encodeURIComponent(o.tenant)}&${range}&granularity=${o.granularity ?? 'hour'}`;
  return (await usageApiGet<{ total: { credits: number } }>(port, apiToken, query)).total.credits;
}

/** Every session the ledger holds for `tenant` (all pages). The stack needs USAGE_API_TOKEN = `apiToken`. */
export function ledgerSessions(stack: Stack, apiToken: string, tenant = 'base'): Promise<LedgerSession[]> {
  return ledgerSessionsAt(stack.gateway.server.adminPort, apiToken, tenant);
}

/** The same from the gateway (or replica) whose admin port is `port`. */
export async function ledgerSessionsAt(port: number, apiToken: string, tenant: string): Promise<LedgerSession[]> {
  const base = `/v1/usage/sessions?tenant=${tenant}`;
  const out: LedgerSession[] = [];
  let cursor: string | null = null;
  do {
    const body: { sessions: LedgerSession[]; next: string | null } = await usageApiGet(
      port,
      apiToken,
      cursor ? `${base}&cursor=${encodeURIComponent(cursor)}` : base,
    );
    out.push(...body.sessions);
    cursor = body.next;
  } while (cursor);
  return out;
}

/** ledgerSessions() once it holds at least `count` sessions and every one has ended (the journal and
 *  the queue flushed): read every 50 ms, 100 times at the most, then as it is. */
export async function endedLedgerSessions(
  stack: Stack,
  apiToken: string,
  o: { count?: number; tenant?: string } = {},
): Promise<LedgerSession[]> {
  const { count = 0, tenant = 'base' } = o;
  let rows = await ledgerSessions(stack, apiToken, tenant);
  for (let i = 0; i < 100 && (rows.length < count || rows.some((r) => r.end === null)); i++) {
    await delay(50);
    rows = await ledgerSessions(stack, apiToken, tenant);
  }
  return rows;
}
