// How one replica signs a hop to another and how the owner checks it: an HMAC of CLUSTER_SECRET over
// a timestamp, the session's record key hash and the identity the sender verified (which names the
// address it meant and itself). A signed hop is good once. The time check alone lets a captured hop request be replayed
// for as long as its signature is fresh (HOP_MAC_WINDOW_MS either way), so the owner remembers each signature it
// accepted until it could no longer pass that check: in process, and in Redis when there is one, so a
// new process under the same REPLICA_ID (a restarted container) refuses it too.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isEndpoint } from '../protocol/index.js';
import type { RedisClient as Redis } from '../redis/index.js';
import type { HopIdentity } from './hop.js';
import { recordKeyHash } from './records.js';

/** How long a used signature is remembered: past it, the time check refuses it anyway. */
/** A signed hop older (or newer) than this is refused: a captured one is not replayable for long. */
export const HOP_MAC_WINDOW_MS = 30_000;

const REMEMBER_MS = 2 * HOP_MAC_WINDOW_MS + 1000;
/** Signatures remembered in process at most; past it new hops are refused until old ones expire. */
const MAX_REMEMBERED = 100_000;
const USED = 'sgw:hop-used:';

export interface UsedSignatures {
  /** true the first time `signature` (hex) is presented; false for a replay (or when it cannot tell). */
  firstUse(signature: string): Promise<boolean>;
}

export function createUsedSignatures(redis?: Redis, now: () => number = Date.now): UsedSignatures {
  // Insertion order is expiry order (each entry lives REMEMBER_MS from its insertion): the oldest go first.
  const seen = new Map<string, number>();
  const remember = (signature: string): boolean => {
    const t = now();
    for (const [s, until] of seen) {
      if (until > t) break;
      seen.delete(s);
    }
    if (seen.has(signature) || seen.size >= MAX_REMEMBERED) return false;
    seen.set(signature, t + REMEMBER_MS);
    return true;
  };
  return {
    async firstUse(signature) {
      if (!remember(signature)) return false;
      if (!redis) return true;
      // Redis unreachable: refused (the hop fails and the client reconnects) rather than replayable.
      const set = await redis.set(USED + signature, '1', 'PX', REMEMBER_MS, 'NX').catch(() => null);
      return set === 'OK';
    },
  };
}

const hopPath = (i: Pick<HopIdentity, 'endpoint' | 'interactionId'>) =>
  i.endpoint === 'transcribe'
    ? '/internal/hop/audio-bridge/v2/transcribe'
    : `/internal/hop/audio-bridge/v2/interactions/${i.interactionId}/streams`;

const mac = (secret: string, ts: string, session: string, identity: string) =>
  createHmac('sha256', secret).update(`${ts}\n${session}\n${identity}`).digest();

/** The hop's URL on the owner: the session named by its record key hash, never its resume key. */
export function hopUrl(
  ownerUrl: string,
  resumeKey: string,
  identity: Pick<HopIdentity, 'endpoint' | 'interactionId'>,
): URL {
  const url = new URL(hopPath(identity), ownerUrl);
  url.searchParams.set('session', recordKeyHash(resumeKey));
  return url;
}

/** The headers B sends for session `session` (its record key hash): the identity (base64url JSON)
 *  and `x-sgw-hop: <ms>.<hex MAC>`. */
export function signHop(
  secret: string,
  session: string,
  identity: HopIdentity,
  now = Date.now(),
): Record<string, string> {
  const encoded = Buffer.from(JSON.stringify(identity)).toString('base64url');
  const ts = String(now);
  return { 'x-sgw-identity': encoded, 'x-sgw-hop': `${ts}.${mac(secret, ts, session, encoded).toString('hex')}` };
}

/** A's check: the identity when the MAC is right and fresh, else why not (the reason only, for the log). */
export function verifyHop(
  secret: string,
  session: string,
  identityHeader: string,
  hopHeader: string,
  now = Date.now(),
): HopIdentity | { refused: string } {
  const m = /^(\d{1,15})\.([0-9a-f]{64})$/.exec(hopHeader);
  if (!m || !identityHeader) return { refused: 'no signature' };
  if (Math.abs(now - Number(m[1])) > HOP_MAC_WINDOW_MS) return { refused: 'signature expired' };
  if (!timingSafeEqual(Buffer.from(m[2], 'hex'), mac(secret, m[1], session, identityHeader)))
    return { refused: 'bad signature' };
  const i = JSON.parse(Buffer.from(identityHeader, 'base64url').toString()) as HopIdentity;
  const valid =
    typeof i.tenant === 'string' &&
    isEndpoint(i.endpoint) &&
    typeof i.notices === 'boolean' &&
    typeof i.owner === 'string' &&
    typeof i.ownerUrl === 'string' &&
    typeof i.from === 'string' &&
    ['string', 'undefined'].includes(typeof i.subject) &&
    ['string', 'undefined'].includes(typeof i.environment) &&
    ['string', 'undefined'].includes(typeof i.interactionId);
  return valid ? i : { refused: 'bad identity' };
}
