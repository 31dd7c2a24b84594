// Issues and verifies access tokens the way the real auth server and speech service do
// (Keycloak-style claims; signature against the realm's JWKS, exp/nbf, iss bound to the realm).
import { createHash, randomUUID } from 'node:crypto';
// jose's parts by subpath: its index loads its remote-JWKS module, which imports node:http (see server.ts).
import * as errors from 'jose/errors';
import { createLocalJWKSet } from 'jose/jwks/local';
import { SignJWT } from 'jose/jwt/sign';
import { UnsecuredJWT } from 'jose/jwt/unsecured';
import { jwtVerify } from 'jose/jwt/verify';
import { KeyStore, unknownKey } from './keys.js';
import type { Endpoint } from '../protocol/index.js';
import type { IssueTokenOptions } from './types.js';

export const ALLOWED_SCOPES = new Set(['openid', 'transcribe', 'streams']);
const HS256_SECRET = new TextEncoder().encode('emulator-shared-secret-not-in-any-jwks');

export function issuerFor(authBase: string, tenant: string): string {
  return `${authBase}/realms/${tenant}`;
}

export async function issueToken(
  keys: KeyStore,
  authBase: string,
  nowMs: number,
  o: IssueTokenOptions,
): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  const clientId = o.clientId ?? 'dev';
  const scope = o.scope ?? 'openid';
  const claims = {
    azp: clientId,
    client_id: clientId,
    scope,
    typ: 'Bearer',
    // Keycloak's service-account subject is a stable uuid-like id per client.
    ...(o.withoutSubject
      ? {}
      : {
          sub: `service-account-${createHash('sha256').update(`${o.tenant}/${clientId}`).digest('hex').slice(0, 16)}`,
        }),
  };
  const iss = o.issuer ?? issuerFor(authBase, o.tenant);
  const exp = iat + (o.expiresInSeconds ?? 300);
  const alg = o.alg ?? 'RS256';
  if (alg === 'none') {
    const jwt = new UnsecuredJWT(claims).setIssuer(iss).setIssuedAt(iat).setExpirationTime(exp).setJti(randomUUID());
    if (o.notBeforeSeconds !== undefined) jwt.setNotBefore(iat + o.notBeforeSeconds);
    return jwt.encode();
  }
  const jwt = new SignJWT(claims).setIssuer(iss).setIssuedAt(iat).setExpirationTime(exp).setJti(randomUUID());
  if (o.notBeforeSeconds !== undefined) jwt.setNotBefore(iat + o.notBeforeSeconds);
  if (alg === 'HS256') return jwt.setProtectedHeader({ alg, typ: 'JWT' }).sign(HS256_SECRET);
  const realmKey = await keys.signingKey(o.tenant, alg);
  const key = o.signWithUnknownKey ? await unknownKey(alg) : realmKey;
  // A forged token claims the realm's kid but is signed by a stranger key.
  return jwt.setProtectedHeader({ alg, typ: 'JWT', kid: realmKey.kid }).sign(key.privateKey);
}

export type Verdict = { ok: true; scope: string } | { ok: false; status: 401 | 403; reason: string };

/** What the real service checks at the upgrade; `endpoint` decides which limited scope is needed. */
export async function verifyToken(
  keys: KeyStore,
  authBase: string,
  tenant: string,
  token: string,
  endpoint: Endpoint,
  nowMs: number,
): Promise<Verdict> {
  try {
    const set = await keys.jwks(tenant);
    if (!set) return { ok: false, status: 401, reason: 'unknown tenant' };
    const jwks = createLocalJWKSet(set);
    const { payload } = await jwtVerify(token, jwks, {
      issuer: issuerFor(authBase, tenant),
      algorithms: ['RS256', 'ES256'],
      currentDate: new Date(nowMs),
      requiredClaims: ['exp', 'iat'],
    });
    const scope = typeof payload.scope === 'string' ? payload.scope : '';
    const scopes = new Set(scope.split(' ').filter(Boolean));
    const limited = scopes.has('transcribe') || scopes.has('streams');
    if (limited && !scopes.has(endpoint)) return { ok: false, status: 403, reason: `scope does not grant ${endpoint}` };
    return { ok: true, scope };
  } catch (e) {
    if (e instanceof errors.JWTExpired) return { ok: false, status: 401, reason: 'token expired' };
    if (e instanceof errors.JWTClaimValidationFailed)
      return { ok: false, status: 401, reason: `claim ${e.claim} invalid` };
    return { ok: false, status: 401, reason: 'invalid token' };
  }
}
