// A small Keycloak-shaped auth server for the auth tests: per-realm JWKS and a client-credentials
// token endpoint on a real HTTP port, counting the requests each gets.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type KeyLike } from 'jose';

export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: KeyLike;
  jwk: JWK;
}

export interface TestAuthServer {
  url: string;
  certsRequests: Map<string, number>;
  tokenRequests: Map<string, number>;
  /** Adds a key to the realm's JWKS (created on first use). */
  addKey(realm: string, alg?: string): Promise<SigningKey>;
  /** Replaces the realm's JWKS with exactly these keys. */
  setKeys(realm: string, keys: SigningKey[]): void;
  /** `expiresIn` and `issuedAt` are seconds from now (`issuedAt` NaN: no iat claim). */
  sign(
    realm: string,
    key: SigningKey,
    claims: JWTPayload,
    opts?: { expiresIn?: number; issuedAt?: number; iss?: string; nbf?: number },
  ): Promise<string>;
  /** client-credentials: client id → secret for a realm; token lifetime in seconds. */
  addClient(realm: string, clientId: string, secret: string): void;
  tokenLifetimeSeconds: number;
  /** Makes every request to the server answer this HTTP status (e.g. 500) when set. */
  failWith?: number;
  close(): Promise<void>;
}

export async function startAuthServer(): Promise<TestAuthServer> {
  const realms = new Map<string, SigningKey[]>();
  const clients = new Map<string, Map<string, string>>();
  let kidCounter = 0;
  let issued = 0;

  const state: TestAuthServer = {
    url: '',
    certsRequests: new Map(),
    tokenRequests: new Map(),
    tokenLifetimeSeconds: 300,
    async addKey(realm, alg = 'RS256') {
      const { privateKey, publicKey } = await generateKeyPair(alg);
      const kid = `k${++kidCounter}`;
      const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
      const key = { kid, alg, privateKey, jwk };
      realms.set(realm, [...(realms.get(realm) ?? []), key]);
      return key;
    },
    setKeys(realm, keys) {
      realms.set(realm, keys);
    },
    async sign(realm, key, claims, opts = {}) {
      const nowS = Math.floor(Date.now() / 1000);
      const jwt = new SignJWT({ ...claims })
        .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
        .setIssuer(opts.iss ?? `${state.url}/realms/${realm}`)
        .setExpirationTime(nowS + (opts.expiresIn ?? 300));
      if (!Number.isNaN(opts.issuedAt)) jwt.setIssuedAt(nowS + (opts.issuedAt ?? 0));
      if (opts.nbf !== undefined) jwt.setNotBefore(opts.nbf);
      return jwt.sign(key.privateKey);
    },
    addClient(realm, clientId, secret) {
      if (!clients.has(realm)) clients.set(realm, new Map());
      clients.get(realm)!.set(clientId, secret);
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  const server: Server = createServer((req, res) => {
    const m = /^\/realms\/([^/]+)\/protocol\/openid-connect\/(certs|token)$/.exec(req.url ?? '');
    if (state.failWith) {
      res.writeHead(state.failWith).end();
      return;
    }
    if (!m) {
      res.writeHead(404).end();
      return;
    }
    const [, realm, what] = m;
    const counts = what === 'certs' ? state.certsRequests : state.tokenRequests;
    counts.set(realm, (counts.get(realm) ?? 0) + 1);
    if (what === 'certs') {
      const keys = realms.get(realm);
      if (!keys) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Realm does not exist"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: keys.map((k) => k.jwk) }));
      return;
    }
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const secret = clients.get(realm)?.get(form.get('client_id') ?? '');
      if (
        req.method !== 'POST' ||
        form.get('grant_type') !== 'client_credentials' ||
        !secret ||
        secret !== form.get('client_secret')
      ) {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end('{"error":"unauthorized_client","error_description":"Invalid client or Invalid client credentials"}');
        return;
      }
      issued += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          access_token: `token-${realm}-${issued}`,
          expires_in: state.tokenLifetimeSeconds,
          token_type: 'Bearer',
          scope: form.get('scope'),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
