// Data residency at the gate: a request's environment (query `environment`, else the default) is
// resolved before anything else, and everything after is that environment's: its auth server checks
// the token, its upstream gets the session. An environment not served here is refused outright.
import { gatewayError, type GatewayError } from '../protocol/index.js';
import type { SessionDeps } from '../session/index.js';
import type { Environments, ServedEnvironment, ServerDeps } from './types.js';

export type ResolvedEnvironment = { name: string; served: ServedEnvironment } | { error: GatewayError; reason: string };

export function resolveEnvironment(environments: Environments, query: URLSearchParams): ResolvedEnvironment {
  const name = query.get('environment') ?? environments.defaultName;
  const served = environments.served.get(name);
  if (served) return { name, served };
  // The name is not repeated: it is the client's input, and a list of what is served helps nobody attack.
  const error = gatewayError('ENVIRONMENT_NOT_SERVED', 'this gateway does not serve the requested environment');
  return { error, reason: 'environment_not_served' };
}

/** A session's dependencies: its own environment's upstream and credentials. Throws for an environment
 * not served (fail closed: the gate and the takeover checks keep such a session from being made). */
export function sessionDeps(deps: ServerDeps, environment: string): SessionDeps {
  const served = deps.environments.served.get(environment);
  if (!served) throw new Error('a session of an environment this gateway does not serve');
  return {
    ...deps,
    credentials: served.credentials,
    settings: { ...deps.settings, upstreamWsBase: served.upstreamWsBase },
  };
}
