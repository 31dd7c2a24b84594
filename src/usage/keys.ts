// The Redis key names of the usage ledger and the session limiter. Everything of one tenant (buckets,
// their indexes, its sessions by start, its credit total, its settlement state, its leases) carries
// the tenant's hash tag, so each tenant script or multi-key command stays in one Redis Cluster slot;
// the tenant registry has a tag of its own. A session hash keeps its name from before Cluster support
// ('s:<key>'): its scripts touch that one key only, and a new name would hide the sessions recorded.
import { createHash } from 'node:crypto';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
export type Grain = 'h' | 'd';
export const GRAINS: ReadonlyArray<[Grain, number]> = [
  ['h', HOUR_MS],
  ['d', DAY_MS],
];

export const bucketStart = (start: number, grainMs: number): number => start - (start % grainMs);

export const sessionKey = (prefix: string, key: string): string => `${prefix}s:${key}`;

/** The tenant's keys' common start. A tenant id with a brace would end or split the tag: such a tenant
 * is tagged by a digest of its id, which then follows the tag so that keys stay readable and distinct. */
export function tenantBase(prefix: string, tenant: string): string {
  if (!/[{}]/.test(tenant)) return `${prefix}{t:${tenant}}:`;
  const digest = createHash('sha256').update(tenant).digest('hex').slice(0, 16);
  return `${prefix}{t#${digest}}:${tenant}:`;
}

export interface TenantKeys {
  /** hash micro / mediaMs / sessions of one endpoint's hour or day */
  bucket(endpoint: string, grain: Grain, start: number): string;
  /** sorted set of the starts of the endpoint's non-empty buckets of a grain */
  index(endpoint: string, grain: Grain): string;
  /** sorted set of the tenant's session keys by start */
  sessions: string;
  /** the tenant's cumulative micro-credits (never expires) */
  credits: string;
  /** hash sessionKey → what the tenant's totals hold of that session, for the sessions started that day */
  settled(dayStart: number): string;
  /** sorted set of the session limiter's leases */
  leases: string;
}

export function tenantKeys(prefix: string, tenant: string): TenantKeys {
  const b = tenantBase(prefix, tenant);
  return {
    bucket: (endpoint, grain, start) => `${b}b:${endpoint}:${grain}:${start}`,
    index: (endpoint, grain) => `${b}bi:${endpoint}:${grain}`,
    sessions: `${b}ts`,
    credits: `${b}credits`,
    settled: (dayStart) => `${b}a:${dayStart}`,
    leases: `${b}limit`,
  };
}

/** The registry of tenants, in one slot: the set of all, their order of first start, the key layout's version. */
export const registryKeys = (prefix: string) => ({
  tenants: `${prefix}{r}:tenants`,
  order: `${prefix}{r}:torder`,
  schema: `${prefix}{r}:schema`,
});
