// Data residency in the configuration: the environments this gateway serves (ENVIRONMENTS), each with
// its own upstream and auth server (UPSTREAM_URL_<ENV>, AUTH_URL_<ENV>), and the one a request without
// `environment` gets (DEFAULT_ENVIRONMENT, else the first). The plain UPSTREAM_URL/AUTH_URL are the
// default environment's (the one-environment form). No URL at all: the embedded emulator, one per
// environment. Anything ambiguous stops the start-up: a session must never reach the wrong region.
// Messages name variables, never values (a URL may hold a secret).

/** An environment's name, as in the `environment` query and the UPSTREAM_URL_<ENV> variables. */
export const ENVIRONMENT_NAME = /^[a-z][a-z0-9-]{0,15}$/;
const NAME_RULE = 'must match ^[a-z][a-z0-9-]{0,15}$';
/** ENVIRONMENTS and DEFAULT_ENVIRONMENT unset: today's one environment. */
const FALLBACK = 'eu';

export interface EnvironmentConfig {
  name: string;
  /** both set (a real upstream) or neither (the embedded emulator) */
  upstreamUrl?: string;
  authUrl?: string;
}

export interface EnvironmentsConfig {
  environments: EnvironmentConfig[];
  defaultEnvironment: string;
}

type Env = Record<string, string | undefined>;

/** `eu-west` → UPSTREAM_URL_EU_WEST. */
export const environmentVar = (prefix: 'UPSTREAM_URL' | 'AUTH_URL', name: string): string =>
  `${prefix}_${name.toUpperCase().replace(/-/g, '_')}`;

/** A URL with one of `schemes`, its scheme lower-cased (as config.ts does); undefined if it is not one. */
function checkedUrl(v: string, schemes: string[]): string | undefined {
  if (!URL.canParse(v) || !schemes.includes(new URL(v).protocol.slice(0, -1))) return undefined;
  return v.replace(/^[a-z][a-z0-9+.-]*:/i, (scheme) => scheme.toLowerCase());
}

function listed(env: Env, problems: string[]): string[] {
  if (env.ENVIRONMENTS === undefined) return [env.DEFAULT_ENVIRONMENT ?? FALLBACK];
  const names = env.ENVIRONMENTS.split(',').map((s) => s.trim());
  names.forEach((n, i) => {
    if (!ENVIRONMENT_NAME.test(n)) problems.push(`ENVIRONMENTS entry ${i + 1} ${NAME_RULE}`);
  });
  if (new Set(names).size !== names.length) problems.push('ENVIRONMENTS lists an environment more than once');
  return names;
}

/** One environment's pair: its own variables, or for the default environment the plain pair. */
function urlsOf(env: Env, name: string, isDefault: boolean, problems: string[]): EnvironmentConfig {
  const [upVar, authVar] = [environmentVar('UPSTREAM_URL', name), environmentVar('AUTH_URL', name)];
  const own = env[upVar] !== undefined || env[authVar] !== undefined;
  const plain = env.UPSTREAM_URL !== undefined || env.AUTH_URL !== undefined;
  if (isDefault && own && plain)
    problems.push(
      `UPSTREAM_URL/AUTH_URL and ${upVar}/${authVar} are both set for the default environment: set one form`,
    );
  const [up, auth] = own || !isDefault ? [env[upVar], env[authVar]] : [env.UPSTREAM_URL, env.AUTH_URL];
  const upstreamUrl = up === undefined ? undefined : checkedUrl(up, ['ws', 'wss']);
  const authUrl = auth === undefined ? undefined : checkedUrl(auth, ['http', 'https']);
  // The plain pair's own checks (schemes, half-set) are config.ts's.
  if (own && (up === undefined) !== (auth === undefined))
    problems.push(`${up === undefined ? upVar : authVar} is unset: set both ${upVar} and ${authVar} or neither`);
  if (own && up !== undefined && !upstreamUrl) problems.push(`${upVar} must be a ws or wss URL`);
  if (own && auth !== undefined && !authUrl) problems.push(`${authVar} must be a http or https URL`);
  return { name, ...(upstreamUrl && { upstreamUrl }), ...(authUrl && { authUrl }) };
}

/** UPSTREAM_URL_<X>/AUTH_URL_<X> for an environment not served: a typo, or a region left out by mistake. */
function strays(env: Env, names: string[], problems: string[]): void {
  const known = new Set(names.flatMap((n) => [environmentVar('UPSTREAM_URL', n), environmentVar('AUTH_URL', n)]));
  for (const key of Object.keys(env).sort()) {
    if (/^(UPSTREAM_URL|AUTH_URL)_/.test(key) && env[key] !== undefined && !known.has(key))
      problems.push(`${key} is set but names no environment in ENVIRONMENTS`);
  }
}

/** `env` without empty values (as loadConfig cleans it); problems are pushed, one line each. */
export function parseEnvironments(env: Env, problems: string[]): EnvironmentsConfig {
  const names = listed(env, problems);
  const defaultEnvironment = env.DEFAULT_ENVIRONMENT ?? names[0];
  if (!ENVIRONMENT_NAME.test(defaultEnvironment)) problems.push(`DEFAULT_ENVIRONMENT ${NAME_RULE}`);
  else if (!names.includes(defaultEnvironment))
    problems.push('DEFAULT_ENVIRONMENT must be one of the environments in ENVIRONMENTS');
  const environments = names.map((n) => urlsOf(env, n, n === defaultEnvironment, problems));
  strays(env, names, problems);
  // Some with an upstream and some without would send the latter to an emulator in production.
  if (environments.some((e) => e.upstreamUrl || e.authUrl)) {
    for (const e of environments.filter((x) => !x.upstreamUrl && !x.authUrl)) {
      const vars = `${environmentVar('UPSTREAM_URL', e.name)} and ${environmentVar('AUTH_URL', e.name)}`;
      problems.push(`${vars} are unset: every environment needs its upstream once one has (none: the emulators)`);
    }
  }
  return { environments, defaultEnvironment };
}
