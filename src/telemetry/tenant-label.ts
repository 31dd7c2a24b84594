// Tenant names become metric labels; an unbounded set would grow Prometheus without limit,
// so the first `max` distinct tenants keep their name and the rest share 'other'.
// (A session's credit series start at 0 when it goes live: session/observers.ts.)
let maxTenants = 50; // METRICS_MAX_TENANTS's default; startGateway applies the validated value
const known = new Set<string>();

export function tenantLabel(tenant: string): string {
  if (known.has(tenant)) return tenant;
  if (known.size < maxTenants) {
    known.add(tenant);
    return tenant;
  }
  return 'other';
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
}
