// Tenant names go into auth-server URLs; only realm-safe names get that far (no path injection).

const TENANT_RE = /^[A-Za-z0-9._-]{1,64}$/;

export function isValidTenant(tenant: string): boolean {
  return TENANT_RE.test(tenant) && tenant !== '.' && tenant !== '..';
}

/** `{authUrl}/realms/{tenant}`: the realm base and the `iss` of its tokens. */
export function realmUrl(authUrl: string, tenant: string): string {
  return `${trimSlash(authUrl)}/realms/${tenant}`;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
