// Run by audit.test.ts as a process of its own: the audit trail on stdout (no AUDIT_LOG_FILE) records
// `n` events 50 ms apart (argv[2], default 1) and closes, as a gateway without AUDIT_LOG_FILE writes
// its events; then it says on stderr how many it counted as not written.
import { setTimeout as delay } from 'node:timers/promises';
import { createAudit } from '../../src/audit/index.js';
import { logger, registry } from '../../src/telemetry/index.js';

const n = Number(process.argv[2] ?? 1);
const audit = await createAudit({ retentionDays: 1, trustedProxies: 0, logger });
for (let i = 0; i < n; i++) {
  audit.record({ event: 'session_opened', outcome: 'ok', tenant: 't', sessionId: i === 0 ? 's' : `s${i}` });
  await delay(50);
}
await audit.close();
const failed = (await registry.metrics())
  .split('\n')
  .find((l) => l.startsWith('speech_gateway_audit_write_failures_total{sink="log"}'));
process.stderr.write(`${failed?.split(' ').at(-1) ?? 0}\n`);
