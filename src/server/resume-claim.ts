// A new session opened with a resume key claims the key before its socket is accepted: in this
// process (a set of keys whose sockets are being opened here), and with Redis in the key's session
// record, atomically, so that of two connections with one new key (two browser tabs sharing a stored
// key), on one replica or on two, one opens the session and the other is refused 409
// RESUME_KEY_IN_USE; its retry then resumes the session like any later connection with the key.
import { claimKey, recordKeyHash } from '../cluster/index.js';
import type { SessionInfo } from '../session/index.js';
import type { ServerDeps, ServerState } from './types.js';

/** false: another connection holds or is claiming `info.resumeKey`. */
export async function claimResumeKey(
  deps: ServerDeps,
  state: ServerState,
  info: SessionInfo,
  replaceOwner?: string,
): Promise<boolean> {
  const key = recordKeyHash(info.resumeKey!);
  if (state.claiming.has(key) || state.resumable.has(key)) return false;
  state.claiming.add(key);
  if (!deps.cluster.records.shared) return true;
  try {
    if (await claimKey(deps.cluster, info, replaceOwner)) return true;
  } catch (err) {
    // Redis away: as when its lookup failed, the session is this replica's alone (claimed here only).
    deps.logger.warn({ event: 'resume_claim_failed', err: (err as Error).message }, 'resume key not claimed in Redis');
    return true;
  }
  state.claiming.delete(key);
  return false;
}

/** The claimed socket opened: from now on the session holds the key (state.resumable, its record). */
export function claimTaken(state: ServerState, key: string): void {
  state.claiming.delete(recordKeyHash(key));
}

/** The claimed socket will not become a session (its client went, or the gateway drains). */
export function dropClaim(deps: ServerDeps, state: ServerState, key: string): void {
  state.claiming.delete(recordKeyHash(key));
  if (deps.cluster.records.shared)
    void deps.cluster.records.remove(recordKeyHash(key), deps.cluster.replicas.id).catch(() => undefined);
}
