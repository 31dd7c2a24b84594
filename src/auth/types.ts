// The contract between the server's upgrade handler and the auth module: plain data in, a
// decision out, so the server never sees jose and the auth code never sees uWS.
import type { Endpoint } from '../protocol/index.js';
import type { GatewayError } from '../protocol/index.js';

export interface UpgradeRequest {
  endpoint: Endpoint;
  /** Raw query string, parsed. */
  query: URLSearchParams;
  /** Lower-case names: authorization, tenant-name, sec-websocket-protocol, origin, host. */
  headers: Record<string, string>;
}

/** Bounded set of refusal labels, safe to use as a metric label (pre-register them all). */
export const REFUSAL_REASONS = [
  'origin',
  'token_missing',
  'token_malformed',
  'tenant_missing',
  'tenant_invalid',
  'bad_algorithm',
  'issuer',
  'wrong_tenant',
  'unknown_tenant',
  'unknown_key',
  'bad_signature',
  'token_expired',
  'not_yet_valid',
  'claims',
  'scope',
  'full_access_from_browser',
  'jwks_unavailable',
  'jwks_rate_limited',
] as const;

export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export type AuthDecision =
  | {
      ok: true;
      tenant: string;
      scopes: string[];
      subject?: string;
      clientId?: string;
      tokenKind: 'limited' | 'full';
      /** The raw JWT (for passthrough upstream). Never log it. */
      clientToken: string;
      /** ms epoch; only checked at the upgrade, the session may outlive it. */
      tokenExpiresAt: number;
      /** The Sec-WebSocket-Protocol value to answer with, when the client offered protocols. */
      protocol?: string;
      via: 'query' | 'header' | 'protocol';
      /**
       * Only with `allowExpired`: the token has expired but everything else about it verified, and it
       * has a subject, and it expired at most the resume grace plus its lifetime ago. Good for nothing
       * but resuming a session of the same tenant, subject and endpoint within its grace period;
       * otherwise refuse it as TOKEN_EXPIRED.
       */
      expired?: true;
    }
  | {
      ok: false;
      /** 503 only when the auth server's keys could not be fetched, or not now (not the client's fault). */
      status: 401 | 403 | 503;
      error: GatewayError;
      reason: RefusalReason;
    };

export interface AuthOptions {
  /** AUTH_URL base, e.g. 'https://auth.eu.corti.app' or the emulator's http://127.0.0.1:PORT. */
  authUrl: string;
  allowedOrigins: string[] | 'same-origin' | '*';
  allowFullAccessFromBrowsers: boolean;
  /** Default 30. */
  clockToleranceSeconds?: number;
  /** RESUME_GRACE_SECONDS (default 30): how long past its lifetime an expired token may still resume. */
  resumeGraceSeconds?: number;
  /** Min time between JWKS refetches on an unknown kid, default 30000. */
  jwksCooldownMs?: number;
  /** JWKS kept at most this long before a refetch, default 600000 (drops revoked keys). */
  jwksMaxAgeMs?: number;
  fetch?: typeof fetch;
  /** Clock (ms epoch) for token times and JWKS cooldowns; tests inject a fake one. */
  now?: () => number;
}

export interface AuthenticateOptions {
  /** A resume: an expired token is answered ok with `expired: true` instead of TOKEN_EXPIRED. */
  allowExpired?: boolean;
}

export interface Authenticator {
  authenticate(req: UpgradeRequest, opts?: AuthenticateOptions): Promise<AuthDecision>;
  close(): void;
}
