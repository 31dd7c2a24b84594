// A resumable session's life across replicas: a new one claims its key (claimKey), its owner keeps its
// record (keepRecord, the client's content sealed), a replica that gets its key decides how to resume
// it (findResume), the drain hands it over (handOver), and a handed-over session nobody resumed is
// ended by whichever replica's janitor sees it first.
import { setTimeout as sleep } from 'node:timers/promises';
import { type Restore, type Session, type SessionInfo, type SessionSnapshot } from '../session/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import type { SessionLimiter } from '../usage/index.js';
import {
  type RecordHead,
  type RecordState,
  type RecordStore,
  type RecordTimeline,
  type SealedRecord,
  type SessionRecord,
} from './records.js';
import {
  authenticPosition,
  openRecord,
  recordKeys,
  sealRecord,
  signedPosition,
  type RecordKeys,
} from './record-seal.js';
import type { Replicas } from './replicas.js';
import { decodePosition, encodePosition, type Positions } from './positions.js';
import { addressRefuses } from './owner-probe.js';

/** What the session parts of the cluster need. */
export interface TakeoverDeps {
  records: RecordStore;
  replicas: Replicas;
  logger: Logger;
}

/** How often an owner writes the position of a session that moved on (a final delivered is written at once). */
const REFRESH_MS = 2000;
const POLL_MS = 100;
/** While a handover is awaited, whether its owner is still alive is asked every this many polls. */
const OWNER_CHECK_POLLS = 10;
/** A handed-over slot stays taken this much past the grace, for the janitor to release. */
const SLOT_MARGIN_MS = 30_000;

/** What keeping a session's record needs: the replica's batched positions. */
export type KeeperDeps = TakeoverDeps & { positions: Positions };

/** The record of `info`'s session: with `s`, what another replica goes on from; without, only the
 *  claim of its key (who holds it, whose it is). */
function toRecord(
  r: Pick<TakeoverDeps, 'replicas'>,
  info: SessionInfo,
  s: SessionSnapshot | undefined,
  state: RecordState,
  missed?: string[],
): SessionRecord {
  const head = {
    owner: r.replicas.id,
    ownerUrl: r.replicas.url,
    state,
    tenant: info.tenant,
    endpoint: info.endpoint,
    interactionId: info.interactionId,
    sessionKey: info.sessionKey,
    subject: info.subject,
    environment: info.environment,
    updatedAt: Date.now(),
  };
  if (!s) return head;
  const { init, continuation, config, accepted } = s;
  return {
    ...head,
    timeline: timelineOf(s),
    config,
    accepted,
    init: init.toString('base64'),
    cont: continuation?.bytes.toString('base64'),
    missed,
  };
}

/** The snapshot's numbers: what a record holds in clear. */
function timelineOf(s: SessionSnapshot): RecordTimeline {
  const { init: _i, continuation, config: _c, accepted: _a, ...timeline } = s;
  return { ...timeline, contExpect: continuation?.expect };
}

/** What a session taken over from `r` (a record with its timeline) starts from. */
export function restoreOf(r: SessionRecord, from: 'handover' | 'crash'): Restore {
  const { contExpect, ...timeline } = r.timeline!;
  return {
    ...timeline,
    config: r.config,
    accepted: r.accepted,
    init: Buffer.from(r.init ?? '', 'base64'),
    continuation:
      from === 'handover' && r.cont ? { bytes: Buffer.from(r.cont, 'base64'), expect: contExpect } : undefined,
    missed: r.missed ?? [],
    crash: from === 'crash',
  };
}

/** A new session's claim of its key, before its socket is accepted: false when another connection
 *  claimed it first (on this replica or another). `replaceOwner`: the claim found there was that
 *  owner's, which is dead or does not hold the session (see findResume). */
export function claimKey(
  d: Pick<TakeoverDeps, 'records' | 'replicas'>,
  info: SessionInfo,
  replaceOwner?: string,
): Promise<boolean> {
  const keys = recordKeys(info.resumeKey!);
  return d.records.claimKey(keys.hash, sealRecord(keys, toRecord(d, info, undefined, 'live')), replaceOwner);
}

/** The owner keeps the record of a session opened with a resume key: written in full at its lifecycle
 * steps (its first timeline, each new upstream segment), its position (positions.ts) at once when a
 * final reaches the client (so a successor does not repeat it) and otherwise at most every
 * REFRESH_MS; checked and kept alive by the replica's Positions. Returns what to call when the
 * session leaves this process. */
export function keepRecord(d: KeeperDeps, session: Session): () => void {
  const keys = recordKeys(session.info.resumeKey!);
  let full = 'claim'; // what the record holds in full: the key's claim (claimKey), or a segment's timeline
  let moved = '';
  let failing = false;
  const putFull = (snapshot: SessionSnapshot | undefined) =>
    d.records.put(keys.hash, sealRecord(keys, toRecord(d, session.info, snapshot, 'live'))).then(
      (mine) => {
        failing = false;
        if (!mine) void disown(d, keys, session);
      },
      (err: Error) => {
        if (!failing)
          d.logger.warn(
            { event: 'record_write_failed', session: session.key, err: err.message },
            'session record not written',
          );
        failing = true;
        full = '';
      },
    );
  const write = (urgent: boolean) => {
    if (session.leaving) return;
    const snapshot = session.snapshot();
    const stage = snapshot ? `segment ${snapshot.segment}` : 'claim';
    if (stage !== full) {
      full = stage;
      moved = '';
      void putFull(snapshot);
      return;
    }
    if (!snapshot) return;
    // A successor after a crash goes on from the resume point when there is one (the client resends
    // from it): the bytes received past it are not worth a write.
    const { resume, finalUntil, seq, offset } = snapshot;
    const mark = `${resume ? resume.audioBytes : `~${snapshot.audioBytes}`}/${finalUntil}/${seq}/${offset}`;
    if (mark === moved) return;
    moved = mark;
    d.positions.set(keys.hash, signedPosition(keys, encodePosition(timelineOf(snapshot), Date.now())), urgent);
  };
  session.on((e) => e.type === 'final_delivered' && write(true));
  const timer = setInterval(() => write(false), REFRESH_MS);
  timer.unref();
  const untrack = d.positions.track(keys.hash, (r) => {
    if (session.leaving) return;
    if (!r) {
      full = ''; // gone (Redis lost it): written again in full
      write(false);
    } else if (r.owner !== d.replicas.id) void disown(d, keys, session);
  });
  return () => {
    clearInterval(timer);
    untrack();
    if (!session.handedOver) void d.records.remove(keys.hash, d.replicas.id).catch(() => undefined);
  };
}

/** The record names another owner: another replica took this session over while this one was taken
 *  for dead (the same ledger session goes on there), or, the claim here having lapsed (Redis lost
 *  it), another session claimed the key. Either way this process lets go of it properly. */
async function disown(d: TakeoverDeps, keys: RecordKeys, session: Session): Promise<void> {
  const now = await d.records.get(keys.hash).catch(() => undefined);
  session.disown(now === undefined || now.sessionKey === session.key);
}

export type ResumeRoute =
  | { route: 'none'; replaceOwner?: string } // a new session: claim the key (replacing that owner's bare claim), or TOKEN_EXPIRED
  | { route: 'forbidden' }
  | { route: 'hop'; owner: { id: string; url: string } }
  | { route: 'restore'; record: SessionRecord; from: 'handover' | 'crash' }
  | { route: 'wait' } // its owner is handing it over now: see awaitHandover
  | { route: 'gone' }; // the record changed hands while we looked, or its handover did not finish in time

/** Where a resume of a key this replica does not hold goes (docs/design.md, 'Where a resume goes').
 * Only the same tenant, subject, environment, endpoint and interaction may resume (else 'forbidden').
 * A record taken over here is claimed (compare-and-set) before the client's socket is accepted.
 * `notOwner`: a replica whose address answered a hop to it that it is not the owner (HOP_NOT_OWNER). */
export async function findResume(
  d: TakeoverDeps & { legacyEnvironment: string },
  key: string,
  who: Pick<SessionInfo, 'tenant' | 'subject' | 'environment' | 'endpoint' | 'interactionId'>,
  notOwner?: string,
): Promise<ResumeRoute> {
  const keys = recordKeys(key);
  const stored = await d.records.get(keys.hash);
  if (!stored) return { route: 'none' };
  const r = opened(d, keys, stored);
  const same =
    r !== undefined &&
    r.tenant === who.tenant &&
    r.subject !== undefined &&
    r.subject === who.subject &&
    // A record of another environment is never taken over here; one written before environments
    // were kept (none in it) was the one-environment gateway's, now the default environment.
    (r.environment ?? d.legacyEnvironment) === who.environment &&
    r.endpoint === who.endpoint &&
    r.interactionId === who.interactionId;
  if (!same) return { route: 'forbidden' };
  if (!r.timeline) return bareClaim(d, r, notOwner);
  return r.state === 'handing_over' ? { route: 'wait' } : decide(d, keys, r, notOwner);
}

/** The record's content, or undefined (logged) when it does not open: changed in Redis. */
function opened(d: TakeoverDeps, keys: RecordKeys, r: SealedRecord): SessionRecord | undefined {
  try {
    return openRecord(keys, r);
  } catch (err) {
    d.logger.warn(
      { event: 'record_unreadable', session: r.sessionKey, err: (err as Error).message },
      'session record content does not open; the resume is refused',
    );
    return undefined;
  }
}

/** A key claimed by a session with nothing to take over yet: carried to its live owner (a resume of
 *  it there), else (its owner dead, or holding no such session) the key is this new session's. */
async function bareClaim(d: TakeoverDeps, r: SessionRecord, notOwner?: string): Promise<ResumeRoute> {
  if (r.owner !== d.replicas.id && r.owner !== notOwner && (await ownerAlive(d, r))) return hopTo(d, r.owner);
  return { route: 'none', replaceOwner: r.owner };
}

/** A hop to live replica `owner`, at the address its own (signed) heartbeat gives, never the
 *  record's: with none, the client is asked to retry ('gone'). */
async function hopTo(d: TakeoverDeps, owner: string): Promise<ResumeRoute> {
  const url = await d.replicas.address(owner);
  return url ? { route: 'hop', owner: { id: owner, url } } : { route: 'gone' };
}

/** After 'wait' (the client's socket is open, its frames held): polls until the handover is done, for
 * at most `waitMs` and while the client is there, then takes the session over if nobody else did. An
 * owner that dies while handing over (killed at the end of its termination grace) is taken over from. */
export async function awaitHandover(
  d: TakeoverDeps,
  key: string,
  waitMs: number,
  wanted: () => boolean,
): Promise<ResumeRoute> {
  const keys = recordKeys(key);
  const deadline = Date.now() + waitMs;
  let r = await d.records.get(keys.hash);
  for (let polls = 1; r?.state === 'handing_over' && Date.now() < deadline && wanted(); polls++) {
    if (polls % OWNER_CHECK_POLLS === 0 && !(await ownerAlive(d, r))) break;
    await sleep(POLL_MS);
    r = await d.records.get(keys.hash);
  }
  if (!r || !wanted() || (r.state === 'handing_over' && (await ownerAlive(d, r)))) return { route: 'gone' };
  const open = opened(d, keys, r);
  const route = open?.timeline ? await decide(d, keys, open) : undefined;
  return route?.route === 'restore' ? route : { route: 'gone' }; // the socket is open: no hop from here
}

/** Its heartbeat is there and its address (its heartbeat's) does not refuse connections. */
async function ownerAlive(d: TakeoverDeps, r: RecordHead): Promise<boolean> {
  if (r.owner === d.replicas.id) return true;
  if (!(await d.replicas.alive(r.owner))) return false;
  const url = await d.replicas.address(r.owner);
  return url === undefined || !(await addressRefuses(url));
}

/** A record not being handed over (or whose owner died handing it over): carried to its live owner,
 * else claimed for this replica. */
async function decide(
  d: TakeoverDeps,
  keys: RecordKeys,
  found: SessionRecord,
  notOwner?: string,
): Promise<ResumeRoute> {
  const mine = found.owner === d.replicas.id; // a record of a session that is no longer here: as a dead owner's
  if (found.state === 'live' && !mine && found.owner !== notOwner && (await ownerAlive(d, found)))
    return hopTo(d, found.owner);
  const r = found.state === 'live' ? await withPosition(d, keys, found) : found;
  const next: SessionRecord = {
    ...r,
    owner: d.replicas.id,
    ownerUrl: d.replicas.url,
    state: 'live',
    missed: undefined,
    cont: undefined,
    updatedAt: Date.now(),
  };
  next.timeline = { ...r.timeline!, contExpect: undefined };
  if (!(await d.records.claim(keys.hash, { owner: r.owner, state: r.state }, sealRecord(keys, next))))
    return { route: 'gone' };
  return { route: 'restore', record: r, from: r.state === 'handed_over' ? 'handover' : 'crash' };
}

/** A live record of a dead owner with where its session last stood: its owner's position of it, when
 *  written after the record (a handed-over record is whole: written last, at the handover). */
async function withPosition(d: TakeoverDeps, keys: RecordKeys, r: SessionRecord): Promise<SessionRecord> {
  const stored = r.timeline && (await d.records.position(r.owner, keys.hash));
  const position = stored ? authenticPosition(keys, stored) : undefined;
  const p = position ? decodePosition(position, r.timeline!) : undefined;
  return p && p.at >= r.updatedAt ? { ...r, timeline: p.timeline } : r;
}

/** Counts a takeover. What a crash lost is counted by the session (takeover_lost_media) once its
 * restored stream shows where it goes on: the record's mediaReceived is up to 2 s old. */
export function countTakeover(d: TakeoverDeps, r: SessionRecord, from: 'handover' | 'crash'): void {
  metrics.takeovers.inc({ from });
  d.logger.info(
    {
      event: 'session_taken_over',
      session: r.sessionKey,
      from,
      previousOwner: r.owner,
      segment: (r.timeline?.segment ?? 0) + 1,
    },
    'session taken over',
  );
}

/** The drain's handover of one session: the record says handing over while its upstream session ends,
 * then handed over (with what the client missed) until a replica claims it or the grace ends. */
export async function handOver(
  d: TakeoverDeps & { limiter: SessionLimiter; graceSeconds: number },
  session: Session,
): Promise<boolean> {
  const keys = recordKeys(session.info.resumeKey!);
  const before = session.snapshot();
  if (!before) return false;
  const started = Date.now();
  session.announceHandover(); // its keeper writes no more 'live' records
  try {
    if (!(await d.records.put(keys.hash, sealRecord(keys, toRecord(d, session.info, before, 'handing_over')))))
      return false;
  } catch (err) {
    d.logger.warn(
      { event: 'handover_failed', session: session.key, err: (err as Error).message },
      'session record not written; the session drains here',
    );
    return false;
  }
  const after = await session.handOver();
  if (!after) {
    metrics.handovers.inc({ result: 'failed' });
    return false;
  }
  const graceMs = d.graceSeconds * 1000;
  const { missed, ...snapshot } = after;
  const record = sealRecord(keys, toRecord(d, session.info, snapshot, 'handed_over', missed));
  const written = await d.records.put(keys.hash, record, Date.now() + graceMs).catch(() => false);
  await d.limiter.handOff(session.info.tenant, session.key, graceMs + SLOT_MARGIN_MS);
  metrics.handovers.inc({ result: written ? 'ok' : 'failed' });
  d.logger.info(
    { event: 'handover', session: session.key, ok: written, ms: Date.now() - started },
    written ? 'session handed over' : 'session ended upstream but its record could not be written',
  );
  return written;
}
