// The audit trail on stdout (the default) with a log reader that stops reading: a real gateway process
// whose stdout this test stops draining. What waits for the reader is bounded (LOG_QUEUE_BYTES), what
// is dropped is counted, and refusals without a token are folded rather than written a line each.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { metric } from '../support/metrics.js';
import { refusal } from '../support/stack.js';
import { delay, until } from '../support/wait.js';

const API = 'stalled-reader-test-token';
const QUEUE = 256 * 1024;
const MIB = 1024 * 1024;

type Event = Record<string, any>;
const auditLines = (text: string): Event[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{"stream":"audit"'))
    .map((l) => JSON.parse(l) as Event);

/** `n` calls of `call`, `batch` at a time. */
async function times(n: number, batch: number, call: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < n; i += batch)
    await Promise.all(Array.from({ length: Math.min(batch, n - i) }, (_, k) => call(i + k)));
}

/** Resolves once the process's output has not grown for `quietMs`. */
async function drained(g: GatewayProcess, quietMs = 1000): Promise<void> {
  for (let last = -1; last !== g.output().length;) {
    last = g.output().length;
    await delay(quietMs);
  }
}

describe('a log reader that stops reading, with the audit trail on stdout', () => {
  let g: GatewayProcess;
  beforeAll(async () => {
    g = await startGatewayProcess(mkdtempSync(join(tmpdir(), 'sg-stalled-')), {
      USAGE_API_TOKEN: API,
      LOG_QUEUE_BYTES: String(QUEUE),
      AUDIT_COALESCE_SECONDS: '1',
    });
  });
  afterAll(() => g?.stop());

  it('3,000 upgrades without a token are a few lines with a count, not 3,000', async () => {
    g.pauseStdout();
    await times(3000, 100, async () => {
      const r = await refusal(`ws://127.0.0.1:${g.port}/audio-bridge/v2/transcribe?tenant-name=base`);
      assert.equal(r.status, 401);
    });
    g.resumeStdout();
    const refused = () => auditLines(g.output()).filter((e) => e.reason === 'token_missing');
    await until(() => refused().reduce((n, e) => n + (e.count ?? 1), 0) === 3000, 'every refusal counted');
    assert.ok(refused().length <= 10, `${refused().length} lines for 3,000 refusals`);
  });

  it('what waits for it is bounded, and each audit line dropped is counted', async () => {
    await drained(g);
    const before = g.output().length;
    const failed = await metric(g.adminPort, 'speech_gateway_audit_write_failures_total{sink="log"}');
    g.pauseStdout();
    // Each call audited with a tenant of its own: 12,000 lines that fold into nothing, about 3.5 MB.
    await times(12_000, 100, async (i) => {
      const res = await fetch(`http://127.0.0.1:${g.adminPort}/v1/usage/sessions?tenant=made-up-${i}`, {
        headers: { authorization: `Bearer ${API}` },
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    });
    const dropped = (await metric(g.adminPort, 'speech_gateway_audit_write_failures_total{sink="log"}')) - failed;
    g.resumeStdout();
    await drained(g);
    const delivered = g.output().length - before;
    assert.ok(dropped > 0, 'the audit lines dropped are counted');
    assert.ok(delivered < 1.5 * MIB, `${(delivered / MIB).toFixed(2)} MiB waited for the reader`);
    const kept = auditLines(g.output().slice(before)).filter((e) => e.event === 'usage_api_call').length;
    assert.ok(kept + dropped >= 12_000, `${kept} written and ${dropped} dropped of 12,000`);
  });
});
