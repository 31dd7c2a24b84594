// Who may call the usage API: USAGE_API_TOKEN reads every tenant; each token of USAGE_API_TOKENS_FILE
// (a mounted Secret) or USAGE_API_TOKENS (the same JSON inline) reads only its own tenants:
//   {"<name>": {"token": "<secret>", "tenants": ["a", "b"]}}
// Tokens are kept as SHA-256 digests and compared in constant time; errors name a token by its name,
// never by its value.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface ApiToken {
  /** what the audit trail records of the caller */
  name: string;
  digest: Buffer;
  /** 'all': USAGE_API_TOKEN */
  tenants: ReadonlySet<string> | 'all';
}

/** The all-tenant token's name in the audit trail. */
export const ALL_TENANTS_TOKEN = 'USAGE_API_TOKEN';

export const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The token presented, if any matches: every digest is compared, so the time says nothing of which. */
export function matchToken(tokens: readonly ApiToken[], presented: string): ApiToken | undefined {
  const d = digest(presented);
  let found: ApiToken | undefined;
  for (const t of tokens) if (timingSafeEqual(d, t.digest) && !found) found = t;
  return found;
}

export function mayRead(token: ApiToken, tenant: string): boolean {
  return token.tenants === 'all' || token.tenants.has(tenant);
}

/** Every usage API token configured; throws (naming the variable and token name) on a bad entry. */
export function loadApiTokens(o: { all?: string; file?: string; inline?: string }): ApiToken[] {
  const tokens: ApiToken[] = o.all ? [{ name: ALL_TENANTS_TOKEN, digest: digest(o.all), tenants: 'all' }] : [];
  if (o.file) tokens.push(...parseScoped(readFileSync(o.file, 'utf8'), 'USAGE_API_TOKENS_FILE'));
  if (o.inline) tokens.push(...parseScoped(o.inline, 'USAGE_API_TOKENS'));
  return tokens;
}

function parseScoped(text: string, source: string): ApiToken[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${source} is not JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error(`${source} must be a JSON object {"<name>": {"token": "...", "tenants": ["..."]}}`);
  return Object.entries(parsed).map(([name, v]) => scopedToken(name, v, source));
}

function scopedToken(name: string, v: unknown, source: string): ApiToken {
  const { token, tenants } = (typeof v === 'object' && v !== null ? v : {}) as { token?: unknown; tenants?: unknown };
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(name))
    throw new Error(`${source}: token names must be 1-100 characters of A-Z a-z 0-9 . _ -`);
  if (typeof token !== 'string' || token.length < 16 || /\s/.test(token))
    throw new Error(`${source}: "${name}" needs a token of at least 16 characters without whitespace`);
  if (!Array.isArray(tenants) || tenants.length === 0 || !tenants.every((t) => typeof t === 'string' && t !== ''))
    throw new Error(`${source}: "${name}" needs "tenants", a non-empty list of tenant names`);
  return { name, digest: digest(token), tenants: new Set(tenants as string[]) };
}
