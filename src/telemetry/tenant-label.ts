// Tenant names become metric labels; an unbounded set would grow Prometheus without limit,
// so the first `max` distinct tenants keep their name and the rest share 'other'.
// A label's credit series start at 0 when it is first given out (a session starting), so that
// increase() over the credits counts that tenant's first session too.
import { ENDPOINTS } from '../protocol/index.js';
import { metrics } from './metrics.js';

let maxTenants = 50; // METRICS_MAX_TENANTS's default; startGateway applies the validated value
const known = new Set<string>();
let otherUsed = false;

export function tenantLabel(tenant: string): string {
  if (known.has(tenant)) return tenant;
  if (known.size < maxTenants) {
    known.add(tenant);
    return firstUse(tenant);
  }
  if (otherUsed) return 'other';
  otherUsed = true;
  return firstUse('other');
}

function firstUse(label: string): string {
  for (const endpoint of ENDPOINTS) metrics.credits.inc({ tenant: label, endpoint }, 0);
  return label;
}

/** Sets the cap (config METRICS_MAX_TENANTS). Tenants already labelled keep their name. */
export function setMaxTenantLabels(max: number): void {
  maxTenants = Math.max(0, Math.floor(max));
}

/** The cap on tenant labels (METRICS_MAX_TENANTS). */
export const maxTenantLabels = (): number => maxTenants;

/** Forgets the labelled tenants (tests). */
export function resetTenantLabels(): void {
  known.clear();
  otherUsed = false;
}
