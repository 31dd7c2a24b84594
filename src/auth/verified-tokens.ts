// Tokens whose signature verified, by a hash of the whole token: a client opens many sessions with
// one token (a browser's lives 5 minutes, a server's longer), and the signature check is most of a
// socket's set-up cost. An entry is the verified payload, used before the token's `exp` only (from
// then on the token is verified in full again, so it expires exactly as before) and for at most
// REVERIFY_MS, so a key the realm stops publishing stops being accepted at most that much later.
import { createHash } from 'node:crypto';
import type { JWTPayload } from 'jose';

const REVERIFY_MS = 60_000;
/** Entries held at most; the oldest go first (a hash and a payload each, a few hundred bytes). */
const MAX_ENTRIES = 10_000;

interface Entry {
  payload: JWTPayload;
  until: number;
}

export class VerifiedTokens {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number) {}

  /** The payload of this token as it verified, while that may be reused (never past its `exp`). */
  get(token: string, tenant: string): JWTPayload | undefined {
    const key = keyOf(token, tenant);
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (this.now() < e.until) return e.payload;
    this.entries.delete(key);
    return undefined;
  }

  /** `payload` verified now (signature, issuer, claims); `exp` is required, so it is a number. */
  add(token: string, tenant: string, payload: JWTPayload): void {
    const now = this.now();
    const until = Math.min(now + REVERIFY_MS, (payload.exp as number) * 1000);
    if (until <= now) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(keyOf(token, tenant), { payload, until });
  }

  clear(): void {
    this.entries.clear();
  }
}

const keyOf = (token: string, tenant: string) =>
  createHash('sha256').update(tenant).update('\n').update(token).digest('base64');
