// A signed hop is good once. The time check alone lets a captured hop request be replayed for as long
// as its signature is fresh (HOP_MAC_WINDOW_MS either way), so the owner remembers each signature it
// accepted until it could no longer pass that check: in process, and in Redis when there is one, so a
// new process under the same REPLICA_ID (a restarted container) refuses it too.
import type { RedisClient as Redis } from '../redis/index.js';

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
