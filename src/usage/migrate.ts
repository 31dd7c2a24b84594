// One-time move of a single Redis's (or Sentinel's) ledger keys to the names of the Cluster-ready
// layout (keys.ts): the buckets, their indexes and the sessions sets of each tenant under the tenant's
// hash tag, the per-tenant credit totals out of the one 'credits' hash, the registry under its own tag.
// Session hashes keep their names. Run at start-up; idempotent (each key is moved, or merged into one
// the new code wrote meanwhile, in one script), and done once: a version marker says so. Never on a
// Cluster: a cluster deployment starts with the new layout.
import { logger } from '../telemetry/index.js';
import { ENDPOINTS } from '../protocol/index.js';
import { registryKeys, tenantKeys, type Grain } from './keys.js';
import type { ScriptedRedis } from './redis-store.js';

export const SCHEMA = '2';
const isGrain = (g: string | undefined): g is Grain => g === 'h' || g === 'd';
const isEndpoint = (e: string | undefined): boolean => (ENDPOINTS as readonly string[]).includes(e ?? '');

/** Where an old-layout key goes, or null: not one (a session hash, a lease, a new key). */
export function newNameOf(prefix: string, key: string): { to: string; kind: 'hash' | 'zset' } | null {
  const rest = key.slice(prefix.length);
  if (rest.startsWith('b:')) {
    const parts = rest.slice(2).split(':');
    const [start, g, endpoint] = [parts.pop(), parts.pop(), parts.pop()];
    if (!isGrain(g) || !isEndpoint(endpoint) || !/^\d+$/.test(start ?? '') || parts.length === 0) return null;
    return { to: tenantKeys(prefix, parts.join(':')).bucket(endpoint!, g, Number(start)), kind: 'hash' };
  }
  if (rest.startsWith('bi:')) {
    const parts = rest.slice(3).split(':');
    const [g, endpoint] = [parts.pop(), parts.pop()];
    if (!isGrain(g) || !isEndpoint(endpoint) || parts.length === 0) return null;
    return { to: tenantKeys(prefix, parts.join(':')).index(endpoint!, g), kind: 'zset' };
  }
  if (rest.startsWith('ts:') && rest.length > 3)
    return { to: tenantKeys(prefix, rest.slice(3)).sessions, kind: 'zset' };
  return null;
}

const globEscape = (s: string): string => s.replace(/[*?[\]\\]/g, '\\$&');

/** Moves the old layout's keys under `prefix` unless the marker says it was done. Returns the keys moved. */
export async function migrateLedgerKeys(redis: ScriptedRedis, prefix: string): Promise<number> {
  const reg = registryKeys(prefix);
  if ((await redis.get(reg.schema)) === SCHEMA) return 0;
  let moved = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const to = newNameOf(prefix, key);
      if (to) moved += Number(await redis.usageMigrateKey(key, to.to, to.kind));
    }
  } while (cursor !== '0');
  const oldCredits = `${prefix}credits`;
  for (const tenant of await redis.hkeys(oldCredits))
    moved += Number(await redis.usageMigrateCredits(oldCredits, tenantKeys(prefix, tenant).credits, tenant));
  await redis.usageMigrateRegistry(`${prefix}tenants`, `${prefix}torder`, reg.tenants, reg.order);
  await redis.set(reg.schema, SCHEMA);
  if (moved > 0) logger.info({ keys: moved }, 'usage ledger keys moved to the cluster-ready layout');
  return moved;
}
