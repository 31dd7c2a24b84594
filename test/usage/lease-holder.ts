// Child process for the limiter test: takes one session slot and holds it (renewing its lease)
// until killed, like a gateway replica that dies without releasing.
import { createUsage } from '../../src/usage/index.js';

const u = await createUsage({
  redis: process.env.REDIS_URL ? { url: process.env.REDIS_URL } : undefined,
  keyPrefix: process.env.PREFIX,
  journalDir: process.env.JOURNAL_DIR!,
  retentionDays: 1,
  maxSessionsPerTenant: 1,
  leaseTtlMs: 1500,
  leaseRenewMs: 200,
});
const ok = await u.limiter.acquire('acme', 'held-by-child');
process.stdout.write(ok ? 'held\n' : 'refused\n');
setInterval(() => undefined, 1000);
