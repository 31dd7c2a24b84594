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

/** Every session the ledger holds for `tenant` (all pages). The stack needs USAGE_API_TOKEN = `apiToken`. */
export function ledgerSessions(stack: Stack, apiToken: string, tenant = 'base'): Promise<LedgerSession[]> {
  return ledgerSessionsAt(stack.gateway.server.adminPort, apiToken, tenant);
}

/** The same from the gateway (or replica) whose admin port is `port`. */
export async function ledgerSessionsAt(port: number, apiToken: string, tenant: string): Promise<LedgerSession[]> {
  const base = `http://127.0.0.1:${port}/v1/usage/sessions?tenant=${tenant}`;
  const out: LedgerSession[] = [];
  let cursor: string | null = null;
  do {
    const res = await fetch(cursor ? `${base}&cursor=${encodeURIComponent(cursor)}` : base, {
      headers: { authorization: `Bearer ${apiToken}` },
    });
    if (res.status !== 200) throw new Error(`usage API answered ${res.status}: ${await res.text()}`);
    const body = (await res.json()) as { sessions: LedgerSession[]; next: string | null };
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
