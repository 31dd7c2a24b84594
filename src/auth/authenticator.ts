// The upgrade-time decision: origin, then where the token is, then what it claims (cheap checks
// that need no network), then its signature against the tenant realm's keys, then its scope.
// jose's parts by subpath: its index also loads its remote-JWKS module, whose ESM import of node:http
// makes Node evaluate http's lazy exports (the bundled undici, about 14 MB of idle RSS).
import type { JWTPayload, KeyLike } from 'jose';
import { decodeProtectedHeader } from 'jose/decode/protected_header';
import * as errors from 'jose/errors';
import { decodeJwt } from 'jose/jwt/decode';
import { jwtVerify } from 'jose/jwt/verify';
import { JwksBudgetError, JwksCache, JwksUnavailableError, UnknownRealmError } from './jwks-cache.js';
import { originChecker } from './origin.js';
import { refuse, type Refusal } from './refusal.js';
import { isValidTenant, realmUrl, trimSlash } from './tenant.js';
import { bearerToken, presentedCredentials } from './token-source.js';
import { VerifiedTokens } from './verified-tokens.js';
import { isEndpoint, type Endpoint } from '../protocol/index.js';
import type { AuthDecision, AuthenticateOptions, AuthOptions, Authenticator, UpgradeRequest } from './types.js';

/** Asymmetric only: an HS* token would be "verified" with a public key as the secret. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const MAX_TOKEN_CHARS = 16 * 1024;

export function createAuthenticator(o: AuthOptions): Authenticator {
  const now = o.now ?? Date.now;
  const authUrl = trimSlash(o.authUrl);
  const originAllowed = originChecker(o.allowedOrigins);
  const clockTolerance = o.clockToleranceSeconds ?? 30;
  const resumeGrace = o.resumeGraceSeconds ?? 30;
  const jwks = new JwksCache({
    authUrl,
    cooldownMs: o.jwksCooldownMs ?? 30_000,
    maxAgeMs: o.jwksMaxAgeMs ?? 600_000,
    fetch: o.fetch ?? fetch,
    now,
  });
  const verified = new VerifiedTokens(now);

  async function authenticate(req: UpgradeRequest, opts: AuthenticateOptions = {}): Promise<AuthDecision> {
    const origin = req.headers['origin'];
    if (!originAllowed(origin, req.headers['host'])) {
      return refuse('ORIGIN_NOT_ALLOWED', 'origin', 'this origin may not open sockets on this gateway');
    }

    const presented = presentedCredentials(req);
    if (presented.credential === undefined) {
      return refuse('TOKEN_MISSING', 'token_missing', 'send the token as query parameter token=Bearer <token>');
    }
    const token = bearerToken(presented.credential);
    if (token === undefined || token.length > MAX_TOKEN_CHARS) {
      return refuse('TOKEN_INVALID', 'token_malformed', 'token must be "Bearer " followed by a JWT');
    }
    const tenant = presented.tenant;
    if (tenant === undefined)
      return refuse('TENANT_MISSING', 'tenant_missing', 'send the tenant as query parameter tenant-name');
    if (!isValidTenant(tenant)) {
      return refuse('TENANT_INVALID', 'tenant_invalid', 'tenant-name must be 1-64 characters of A-Z a-z 0-9 . _ -');
    }

    // A token verified for this tenant within the last minute passed these checks then: not decoded again.
    const known = verified.get(token, tenant);
    const early = known ? undefined : precheck(authUrl, token, tenant);
    if (early) return early;

    let payload: JWTPayload;
    let expired = false;
    try {
      payload = known ?? (await verify(token, tenant));
    } catch (err) {
      const verified = opts.allowExpired ? expiredButVerified(err) : undefined;
      if (verified === undefined) return verifyRefusal(err, tenant);
      if (expiredTooLongAgo(verified, now() / 1000, resumeGrace + clockTolerance)) {
        return refuse(
          'TOKEN_EXPIRED',
          'token_expired',
          'token expired too long ago to resume a session with; fetch a new one',
        );
      }
      payload = verified;
      expired = true;
    }
    const decision = scopeDecision(req.endpoint, payload, origin === undefined || o.allowFullAccessFromBrowsers, {
      tenant,
      clientToken: token,
      via: presented.via,
      protocol: presented.protocol,
    });
    return expired && decision.ok ? { ...decision, expired: true } : decision;
  }

  async function verify(token: string, tenant: string): Promise<JWTPayload> {
    const payload = await verifySignature({ authUrl, clockTolerance, now, jwks }, token, tenant);
    verified.add(token, tenant, payload);
    return payload;
  }

  return {
    authenticate,
    close: () => {
      jwks.clear();
      verified.clear();
    },
  };
}

/**
 * The claims of a token refused only for its age. jose checks `exp` last (no maxTokenAge here), after
 * the signature, algorithm, issuer, required claims and nbf, so the payload it carries is verified.
 * Without a subject a token cannot be matched to the session it would resume, so it stays refused.
 */
function expiredButVerified(err: unknown): JWTPayload | undefined {
  if (!(err instanceof errors.JWTExpired) || err.claim !== 'exp') return undefined;
  return typeof err.payload.sub === 'string' && err.payload.sub !== '' ? err.payload : undefined;
}

/**
 * A session a client resumes began before its token expired and waits for the client at most the
 * resume grace, so a token that expired more than the grace plus its own lifetime (exp - iat) ago
 * cannot be that client's: whoever holds it is not coming back to a waiting session. A token
 * whose lifetime is unknown (no iat, or iat not before exp) gets the grace only. `slackSeconds`:
 * the grace plus the clock tolerance.
 */
function expiredTooLongAgo(p: JWTPayload, nowSeconds: number, slackSeconds: number): boolean {
  const exp = p.exp as number;
  const lifetime = typeof p.iat === 'number' && p.iat < exp ? exp - p.iat : 0;
  return nowSeconds - exp > slackSeconds + lifetime;
}

/** Checks that need no keys: shape, algorithm, issuer (no JWKS fetch for forged or foreign tokens). */
function precheck(authUrl: string, token: string, tenant: string): Refusal | undefined {
  let alg: unknown;
  let iss: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
    iss = decodeJwt(token).iss;
  } catch {
    return refuse('TOKEN_INVALID', 'token_malformed', 'token is not a well-formed JWT');
  }
  if (typeof alg !== 'string' || !ALGORITHMS.includes(alg)) {
    return refuse('TOKEN_INVALID', 'bad_algorithm', 'token must be signed with an asymmetric algorithm');
  }
  const expected = realmUrl(authUrl, tenant);
  if (iss === expected) return undefined;
  if (typeof iss === 'string' && iss.startsWith(`${authUrl}/realms/`)) {
    return refuse('TENANT_MISMATCH', 'wrong_tenant', `token was not issued for tenant "${tenant}"`);
  }
  return refuse('TOKEN_INVALID', 'issuer', "token was not issued by this gateway's auth server");
}

/** The token's signature and claims against the tenant's keys. */
async function verifySignature(
  d: { authUrl: string; clockTolerance: number; now: () => number; jwks: JwksCache },
  token: string,
  tenant: string,
): Promise<JWTPayload> {
  const { authUrl, clockTolerance, now, jwks } = d;
  const options = {
    issuer: realmUrl(authUrl, tenant),
    algorithms: ALGORITHMS,
    clockTolerance,
    currentDate: new Date(now()),
    requiredClaims: ['exp'],
  };
  try {
    return (await jwtVerify(token, jwks.keyFor(tenant), options)).payload;
  } catch (err) {
    // No kid and several keys of the kind: jose hands us the candidates to try in turn.
    if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
    const candidates = err as unknown as AsyncIterable<KeyLike>;
    for await (const key of candidates) {
      try {
        return (await jwtVerify(token, key, options)).payload;
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

function verifyRefusal(err: unknown, tenant: string): Refusal {
  if (err instanceof errors.JWTExpired)
    return refuse('TOKEN_EXPIRED', 'token_expired', 'token has expired; fetch a new one');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return refuse('TOKEN_INVALID', 'not_yet_valid', 'token is not valid yet (nbf)');
    return refuse('TOKEN_INVALID', 'claims', `token claim "${err.claim}" is missing or invalid`);
  }
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return refuse('TOKEN_INVALID', 'bad_signature', 'token signature does not verify');
  if (err instanceof errors.JWKSNoMatchingKey) {
    return refuse('TOKEN_INVALID', 'unknown_key', `token was signed with a key tenant "${tenant}" does not publish`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed)
    return refuse('TOKEN_INVALID', 'bad_algorithm', 'token algorithm not allowed');
  if (err instanceof UnknownRealmError)
    return refuse('TOKEN_INVALID', 'unknown_tenant', `tenant "${tenant}" is not known to the auth server`);
  if (err instanceof JwksBudgetError) {
    return refuse(
      'AUTH_UNAVAILABLE',
      'jwks_rate_limited',
      'too many sign-ins for tenants this gateway has not seen yet; retry in a few seconds',
    );
  }
  if (err instanceof JwksUnavailableError) {
    return refuse(
      'AUTH_UNAVAILABLE',
      'jwks_unavailable',
      'signing keys could not be fetched from the auth server; retry',
    );
  }
  return refuse('TOKEN_INVALID', 'token_malformed', 'token could not be verified');
}

/** Limited tokens must name this endpoint; full-access tokens stay out of browsers unless allowed. */
function scopeDecision(
  endpoint: Endpoint,
  payload: JWTPayload,
  fullAllowed: boolean,
  base: { tenant: string; clientToken: string; via: 'query' | 'header' | 'protocol'; protocol?: string },
): AuthDecision {
  const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
  const limited = scopes.some(isEndpoint);
  if (limited && !scopes.includes(endpoint)) {
    return refuse('SCOPE_INSUFFICIENT', 'scope', `token scope does not include "${endpoint}"`);
  }
  if (!limited && !fullAllowed) {
    return refuse(
      'FULL_ACCESS_TOKEN_IN_BROWSER',
      'full_access_from_browser',
      `browsers must use a limited token with scope "openid ${endpoint}"`,
    );
  }
  return {
    ok: true,
    ...base,
    scopes,
    subject: typeof payload.sub === 'string' ? payload.sub : undefined,
    clientId: clientIdOf(payload),
    tokenKind: limited ? 'limited' : 'full',
    tokenExpiresAt: (payload.exp as number) * 1000,
  };
}

function clientIdOf(p: JWTPayload): string | undefined {
  for (const k of ['azp', 'client_id', 'clientId']) if (typeof p[k] === 'string') return p[k] as string;
  return undefined;
}
