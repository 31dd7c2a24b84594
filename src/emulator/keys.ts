// Per-tenant signing keys (Keycloak realms), created lazily. Each realm has a current RS256 key
// (rotatable; old keys stay in the JWKS unless dropped) and one ES256 key, all published in the
// realm's JWKS. Tokens are signed and verified with jose. Requests from outside (HTTP, sockets)
// only reach configured realms and those the embedding program made through its own API: a stranger
// naming random tenants gets 404s, not a key pair each.
import { randomUUID } from 'node:crypto';
import type { JWK, KeyLike } from 'jose';
import { exportJWK } from 'jose/key/export';
import { generateKeyPair } from 'jose/key/generate/keypair';

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: KeyLike;
  publicJwk: JWK;
}

interface Realm {
  rsa: SigningKey[]; // last is current
  ec: SigningKey;
}

export const TENANT_NAME = /^[a-z0-9-]{1,63}$/;

async function makeKey(alg: 'RS256' | 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `emulator-${alg.toLowerCase()}-${randomUUID().slice(0, 8)}`;
  const jwk = await exportJWK(publicKey);
  return { kid, alg, privateKey, publicJwk: { ...jwk, kid, use: 'sig', alg } };
}

export class KeyStore {
  private realms = new Map<string, Promise<Realm>>();
  private readonly configured: ReadonlySet<string>;

  constructor(configured: Iterable<string>) {
    this.configured = new Set(configured);
  }

  /** Whether requests from outside may use this realm: configured, or made in-process. */
  serves(tenant: string): boolean {
    return this.configured.has(tenant) || this.realms.has(tenant);
  }

  /** Realms whose keys exist. */
  names(): string[] {
    return [...this.realms.keys()];
  }

  private realm(tenant: string): Promise<Realm> {
    let r = this.realms.get(tenant);
    if (!r) {
      r = Promise.all([makeKey('RS256'), makeKey('ES256')]).then(([rsa, ec]) => ({ rsa: [rsa], ec }));
      this.realms.set(tenant, r);
    }
    return r;
  }

  async signingKey(tenant: string, alg: 'RS256' | 'ES256'): Promise<SigningKey> {
    const realm = await this.realm(tenant);
    return alg === 'ES256' ? realm.ec : realm.rsa[realm.rsa.length - 1];
  }

  /** The realm's public keys; null for a realm not served (no keys are made for it). */
  async jwks(tenant: string): Promise<{ keys: JWK[] } | null> {
    if (!this.serves(tenant)) return null;
    const realm = await this.realm(tenant);
    return { keys: [...realm.rsa.map((k) => k.publicJwk).reverse(), realm.ec.publicJwk] };
  }

  async rotate(tenant: string, dropOld = false): Promise<void> {
    const realm = await this.realm(tenant);
    const next = await makeKey('RS256');
    realm.rsa = dropOld ? [next] : [...realm.rsa, next];
  }
}

/** Keys that no JWKS lists: tokens they sign must fail verification (forged signature). */
const strangers = new Map<string, Promise<SigningKey>>();
export function unknownKey(alg: 'RS256' | 'ES256'): Promise<SigningKey> {
  let k = strangers.get(alg);
  if (!k) {
    k = makeKey(alg);
    strangers.set(alg, k);
  }
  return k;
}
