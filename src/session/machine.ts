// The per-connection protocol (docs/protocol.md, 'Per-connection states') and the session's client
// facts as data and pure transitions: an event comes in, the new state and a list of effects come
// out. Nothing here touches a socket or a timer, so every row is a unit test
// (test/session/machine.test.ts); src/session/session.ts performs the effects.
import { CLOSE, configTimeoutType, serverMessages, type ClientMessage, type Endpoint } from '../protocol/index.js';
import { errorMessage, type ErrorId } from '../protocol/index.js';
import type { Outcome } from '../usage/index.js';

export type { Outcome };

export type Phase =
  | 'awaiting_config' // socket open, no config yet (config deadline running)
  | 'connecting' // config valid locally, upstream session being opened
  | 'configured' // CONFIG_ACCEPTED relayed: audio flows
  | 'ending' // end sent (by client, time limit, or client gone): waiting for usage + ended
  | 'reconnecting' // the upstream connection was lost mid-session: a new one is being opened (audio keeps coming)
  | 'closed';

/** The session's client:
 *  - open: its socket is there and gets the output;
 *  - resuming: a socket took the session over (resume=<key>) and has not sent its config yet: the
 *    output waits for it;
 *  - detached: a resumable client dropped; the session waits for it (RESUME_GRACE_SECONDS), output kept;
 *  - slow: it stopped reading and was closed (it cannot resume);
 *  - gone: closed, or given up on. */
export type ClientState = 'open' | 'resuming' | 'detached' | 'slow' | 'gone';

/** The session leaving this process for another replica:
 *  - leaving: the drain is about to hand it over (its record is no longer the owner's to refresh);
 *  - handing_over: its client is closed (1012) after its next audio message, then its upstream
 *    session ends; its output is kept for the successor;
 *  - disowned: another replica took it over (its client resumed there): its upstream session ends
 *    here, its ledger session and slot are the new owner's;
 *  - key_lost: another session claimed its resume key: it ends here, whole, its client told why;
 *  - left: out of this process (handed over, or disowned), its ledger session going on elsewhere. */
export type Migration = 'leaving' | 'handing_over' | 'disowned' | 'key_lost' | 'left';

export interface SessionState {
  endpoint: Endpoint;
  phase: Phase;
  client: ClientState;
  migration?: Migration;
  /** set once the outcome is known; the session's final word for logs, metrics and the ledger */
  outcome?: Outcome;
  /** while reconnecting: the phase to go back to (an `end` already asked for is sent again) */
  afterReconnect?: 'configured' | 'ending';
  /** the upstream session ended while the client was away: done once the client has its output */
  upstreamEnded?: boolean;
  /** the client is behind the internal hop: it has its output once the relaying replica says so */
  hopClient?: boolean;
}

/** What the gateway's local config check decided (protocol validation + audio plan). */
export type ConfigVerdict =
  { ok: true; upstreamConfig: unknown } | { ok: false; status: 'denied' | 'rejected'; reason: string };

export type SessionEvent =
  | { type: 'client_message'; message: ClientMessage; verdict?: ConfigVerdict }
  | { type: 'client_invalid'; errorId: ErrorId; details: string }
  | { type: 'client_audio'; audio: Buffer }
  /** `resumable`: it came with a resume key its session still holds (it may come back) */
  | { type: 'client_closed'; resumable?: boolean }
  | { type: 'client_resumed'; viaHop?: boolean } // a new socket with the same key took the session over
  | { type: 'client_delivered' } // the relaying replica passed everything sent so far to the client
  | { type: 'resume_grace' } // the detached client did not come back in time
  | { type: 'client_caught_up' } // the resumed client was sent everything it missed
  | { type: 'config_deadline' }
  | { type: 'slot_refused'; details: string } // the config came with the tenant at its cap (MAX_SESSIONS_PER_TENANT)
  | { type: 'time_limit' }
  | { type: 'shutdown' }
  | { type: 'drain_deadline' } // shutdown took too long: finish now, usage as it stands
  | { type: 'client_too_slow'; details: string } // the client stopped reading: its socket is over its backlog bound
  | { type: 'internal_error'; details: string } // a callback threw: this session ends, never the process
  | {
      type: 'upstream_config_status';
      status: 'CONFIG_ACCEPTED' | 'CONFIG_DENIED' | 'CONFIG_REJECTED' | string;
      data: Buffer;
    }
  | { type: 'upstream_ended'; data: Buffer }
  | { type: 'upstream_failed'; errorId: ErrorId; details: string }
  | { type: 'upstream_dropped'; errorId: ErrorId; details: string } // lost mid-session: reconnect if the session can
  | { type: 'upstream_reconnected' }
  | { type: 'audio_failed'; errorId: ErrorId; details: string }
  | { type: 'handover_announced' } // the drain writes a 'handing over' record for it now
  | { type: 'handover_started' } // that record is written: the client is closed after its next audio
  | { type: 'handover_close' } // the client's next audio came, or the wait for it ran out
  | { type: 'disowned'; sameSession: boolean }; // its record names another owner

export type Effect =
  | { type: 'send_client'; message: object }
  | { type: 'relay_client'; data: Buffer } // an upstream message to the client, as its bytes
  | { type: 'close_client'; code: number; reason: string }
  | { type: 'open_upstream'; config: unknown }
  | { type: 'forward_audio'; audio: Buffer } // client audio into the pipeline (held behind a pending flush/end)
  | { type: 'flush_upstream' } // drain the pipeline, then send {"type":"flush"}
  | { type: 'end_upstream' } // drain the pipeline, then send {"type":"end"}
  | { type: 'close_upstream' }
  | { type: 'reconnect_upstream' } // open a new upstream session: same config, then the replay
  | { type: 'open_restored_upstream' } // a restored session's upstream session opens now, not at its next media
  | { type: 'clear_timer'; timer: 'config_deadline' | 'resume_grace' }
  | { type: 'start_resume_grace' }
  | { type: 'await_delivery' } // client_delivered once the relaying replica passed on what was sent
  | { type: 'hold_output' } // the client dropped and may come back: what it misses is kept for it
  | { type: 'keep_output' } // from now on output is kept for the client's next socket (on another replica)
  | { type: 'send_kept_output' } // a move given up: what was kept goes to the client, and output flows again
  | { type: 'start_handover_wait' } // the client is closed after its next audio, or after a short wait
  | { type: 'hurry_audio' } // audio batched or held for pacing goes upstream now
  | { type: 'tell_client_now'; message: object } // past any output kept for a resume
  | { type: 'give_up_slot' } // the tenant slot is the new owner's to renew
  | { type: 'fail_handover' } // a handover under way fails: the session ends here
  | { type: 'leave' } // out of this process (its ledger session and slot go on elsewhere)
  | { type: 'finish'; outcome: Outcome };

/** The graceful end threw too: the session is closed as it stands, its outcome an error. */
export const crashed = (s: SessionState): SessionState => ({ ...s, phase: 'closed', outcome: 'error' });

export function initialState(endpoint: Endpoint): SessionState {
  return { endpoint, phase: 'awaiting_config', client: 'open' };
}

/** A session taken over from another replica: its config is the one the first replica accepted, a new
 * upstream session opens as a reconnection does, and the client's socket has not sent its config yet. */
export function restoredState(endpoint: Endpoint): SessionState {
  return { endpoint, phase: 'reconnecting', afterReconnect: 'configured', client: 'resuming' };
}

/** The client's socket is there (its output goes to it, or waits for its config). */
export const clientThere = (s: SessionState): boolean => s.client === 'open' || s.client === 'resuming';

/** Its upstream session is being ended so the session can go on on another replica. */
export const migrating = (s: SessionState): boolean => s.migration === 'handing_over' || s.migration === 'disowned';

/** The close reason of a client whose session the drain hands over to another replica (with 1012). */
export const HANDED_OVER_REASON = 'handed over: reconnect with your resume key';

type Result = { state: SessionState; effects: Effect[] };

/** Client audio goes into the pipeline, as `client_audio` → `forward_audio` says; the shell reads this
 * per frame instead of dispatching an event. While reconnecting too: the replay carries it to the new
 * upstream session. */
export function forwardsAudio(s: SessionState): boolean {
  return s.phase === 'configured' || s.phase === 'reconnecting';
}

const error = (id: ErrorId, details: string): Effect => ({ type: 'send_client', message: errorMessage(id, details) });

/** Ends the session for good: outcome recorded, both sides closed. */
function finish(s: SessionState, outcome: Outcome, close?: { code: number; reason: string }): Result {
  const effects: Effect[] = [{ type: 'clear_timer', timer: 'config_deadline' }, { type: 'close_upstream' }];
  if (close && clientThere(s)) effects.push({ type: 'close_client', ...close });
  effects.push({ type: 'finish', outcome: s.outcome ?? outcome });
  return { state: { ...s, phase: 'closed', outcome: s.outcome ?? outcome }, effects };
}

/** The upstream session ended and the client has what it said: 1012 when the drain ended it (the
 * client reconnects elsewhere and goes on), else a normal close. */
function finishEnded(s: SessionState): Result {
  const close =
    s.outcome === 'shutdown'
      ? { code: CLOSE.serviceRestart, reason: 'gateway restarting; reconnect' }
      : { code: CLOSE.normal, reason: 'session ended' };
  return finish(s, 'ended', close);
}

/** The graceful end, once the new upstream session is there (upstream_reconnected sends `end`). A
 * session taken over from another replica opens that session with media past its last final, which
 * may never come now: it opens it at once. */
function endAfterReconnect(s: SessionState, outcome: Outcome): Result {
  return {
    state: { ...s, afterReconnect: 'ending', outcome: s.outcome ?? outcome },
    effects: [{ type: 'open_restored_upstream' }],
  };
}

/** Starts the graceful end: pending audio, then `end` upstream; the session finishes on `ended`. */
function beginEnding(s: SessionState, outcome: Outcome): Result {
  return { state: { ...s, phase: 'ending', outcome: s.outcome ?? outcome }, effects: [{ type: 'end_upstream' }] };
}

export function transition(s: SessionState, e: SessionEvent): Result {
  if (s.phase === 'closed') return { state: s, effects: [] };
  switch (e.type) {
    case 'handover_announced':
    case 'handover_started':
    case 'handover_close':
    case 'disowned':
      return migration(s, e);
    case 'client_resumed':
    case 'resume_grace':
    case 'client_caught_up':
    case 'client_delivered':
    case 'client_closed':
      return presence(s, e);
    case 'upstream_config_status':
    case 'upstream_ended':
    case 'upstream_dropped':
    case 'upstream_reconnected':
    case 'upstream_failed':
      return upstream(s, e);
    case 'config_deadline':
    case 'slot_refused':
    case 'time_limit':
    case 'shutdown':
    case 'drain_deadline':
      return deadlines(s, e);

    case 'client_invalid':
      return { state: s, effects: [error(e.errorId, e.details)] };

    case 'client_message':
      return onClientMessage(s, e.message, e.verdict);

    case 'client_audio':
      if (forwardsAudio(s)) return { state: s, effects: [{ type: 'forward_audio', audio: e.audio }] };
      if (s.phase === 'awaiting_config') {
        return {
          state: s,
          effects: [
            {
              type: 'send_client',
              message: serverMessages.configStatus('CONFIG_MISSING', {
                reason: 'send a config message and wait for CONFIG_ACCEPTED before audio; this audio was not forwarded',
              }),
            },
          ],
        };
      }
      if (s.phase === 'connecting') {
        return {
          state: s,
          effects: [
            error('AUDIO_BEFORE_CONFIG', 'wait for CONFIG_ACCEPTED before sending audio; this audio was not forwarded'),
          ],
        };
      }
      return { state: s, effects: [error('MESSAGE_AFTER_END', 'audio after end was not forwarded')] };

    case 'client_too_slow':
      // Nothing more can reach this client; end upstream gracefully so the usage is still final.
      return endWithoutClient(
        s,
        'client_slow',
        [{ type: 'close_client', code: CLOSE.clientTooSlow, reason: 'client too slow' }],
        'slow',
      );

    case 'internal_error':
      return endWithoutClient({ ...s, outcome: undefined }, 'error', [
        error('INTERNAL', e.details),
        { type: 'close_client', code: CLOSE.internal, reason: 'internal error' },
      ]);

    case 'audio_failed':
      // Nothing of a stream that failed validation goes upstream; the client is told why and closed.
      return endWithoutClient(s, 'error', [
        error(e.errorId, e.details),
        { type: 'close_client', code: CLOSE.audioInvalid, reason: e.errorId.toLowerCase() },
      ]);
  }
}

/** Deadlines and the gateway's own reasons to end a session: no config in time, the tenant's cap, the
 * /streams time limit, the drain and its deadline. */
function deadlines(
  s: SessionState,
  e: Extract<SessionEvent, { type: 'config_deadline' | 'slot_refused' | 'time_limit' | 'shutdown' | 'drain_deadline' }>,
): Result {
  switch (e.type) {
    case 'config_deadline':
      if (s.phase !== 'awaiting_config') return { state: s, effects: [] };
      return withFirst(
        finish(s, 'config_timeout', { code: CLOSE.configTimeout, reason: 'no config within the deadline' }),
        {
          type: 'send_client',
          message: serverMessages.configStatus(configTimeoutType(s.endpoint)),
        },
      );

    case 'slot_refused':
      // Nothing was opened upstream: the config is refused as the upgrade would have been.
      if (s.phase !== 'connecting') return { state: s, effects: [] };
      return withFirst(
        finish(s, 'config_denied', { code: CLOSE.tryAgainLater, reason: 'tenant session limit' }),
        error('TENANT_SESSION_LIMIT', e.details),
      );

    case 'time_limit':
      if (s.phase === 'configured') return beginEnding(s, 'time_limit');
      if (s.phase === 'reconnecting') return endAfterReconnect(s, 'time_limit');
      if (s.phase === 'awaiting_config' || s.phase === 'connecting') {
        return finish(s, 'time_limit', { code: CLOSE.normal, reason: 'maximum session duration reached' });
      }
      return { state: s, effects: [] };

    case 'shutdown':
      if (s.phase === 'configured') return beginEnding(s, 'shutdown');
      if (s.phase === 'reconnecting') return endAfterReconnect(s, 'shutdown');
      if (s.phase === 'ending') return { state: s, effects: [] };
      return withFirst(
        finish(s, 'shutdown', { code: CLOSE.serviceRestart, reason: 'gateway restarting; reconnect' }),
        error('GATEWAY_SHUTTING_DOWN', 'the gateway is restarting; reconnect'),
      );

    case 'drain_deadline':
      return finish(s, 'shutdown', { code: CLOSE.serviceRestart, reason: 'gateway restarting; reconnect' });
  }
}

/** The client's comings and goings: a drop (waited for when it may resume), a return, the grace. */
function presence(
  s: SessionState,
  e: Extract<
    SessionEvent,
    { type: 'client_resumed' | 'resume_grace' | 'client_caught_up' | 'client_delivered' | 'client_closed' }
  >,
): Result {
  switch (e.type) {
    case 'client_resumed':
      return {
        state: { ...s, client: 'resuming', hopClient: e.viaHop === true },
        effects: [{ type: 'clear_timer', timer: 'resume_grace' }],
      };

    case 'resume_grace':
      if (s.client === 'resuming' && s.upstreamEnded)
        return finish(s, 'ended', { code: CLOSE.normal, reason: 'session ended; no config came to resume it' });
      if (s.client !== 'detached') return { state: s, effects: [] };
      if (s.upstreamEnded) return finish({ ...s, client: 'gone' }, 'ended');
      // Ended upstream gracefully, as for any client gone, so its usage is final.
      return transition({ ...s, client: 'open' }, { type: 'client_closed' });

    case 'client_caught_up': {
      // The resumed client has had everything, the end message included: the session is over.
      const open: SessionState = { ...s, client: 'open' };
      if (!s.upstreamEnded) return { state: open, effects: [] };
      return open.hopClient ? { state: open, effects: [{ type: 'await_delivery' }] } : finishEnded(open);
    }

    case 'client_delivered':
      return s.upstreamEnded && s.client === 'open' ? finishEnded(s) : { state: s, effects: [] };

    case 'client_closed': {
      // A client that may come back: the session goes on (ending too: the upstream's last output,
      // finals, usage and the end message, waits for it).
      const live = s.phase === 'configured' || s.phase === 'reconnecting' || s.phase === 'ending';
      if (e.resumable && s.client !== 'slow' && live) {
        return {
          state: { ...s, client: 'detached' },
          effects: [{ type: 'hold_output' }, { type: 'start_resume_grace' }],
        };
      }
      const gone: SessionState = { ...s, client: s.client === 'slow' ? 'slow' : 'gone' };
      // A configured session is ended upstream so its usage becomes final.
      if (s.phase === 'configured') return beginEnding(gone, 'client_gone');
      if (s.phase === 'reconnecting') return endAfterReconnect(gone, 'client_gone');
      if (s.phase === 'ending') return { state: gone, effects: [] };
      return finish(gone, 'client_gone');
    }
  }
}

/** What the upstream says of its session: config status, end, loss, a new session after a loss, failure. */
function upstream(
  s: SessionState,
  e: Extract<
    SessionEvent,
    {
      type:
        'upstream_config_status' | 'upstream_ended' | 'upstream_dropped' | 'upstream_reconnected' | 'upstream_failed';
    }
  >,
): Result {
  switch (e.type) {
    case 'upstream_config_status':
      if (s.phase !== 'connecting') return { state: s, effects: [{ type: 'relay_client', data: e.data }] };
      if (e.status === 'CONFIG_ACCEPTED')
        return { state: { ...s, phase: 'configured' }, effects: [{ type: 'relay_client', data: e.data }] };
      return withFirst(
        finish(s, e.status === 'CONFIG_REJECTED' ? 'config_rejected' : 'config_denied', {
          code: e.status === 'CONFIG_REJECTED' ? CLOSE.configRejected : CLOSE.configDenied,
          reason: 'configuration refused by the speech service',
        }),
        { type: 'relay_client', data: e.data },
      );

    case 'upstream_ended': {
      // Its upstream session ended for the move: the session goes on on another replica.
      if (migrating(s)) return { state: { ...s, phase: 'closed', migration: 'left' }, effects: [{ type: 'leave' }] };
      // The client is away or resuming (its output waits for its config): its last output waits for
      // it (or for the grace to end). A client behind the hop may have left with the last of it on its
      // way: the session ends once the relaying replica says its client had it, or keeps it if not.
      const relay: Effect = { type: 'relay_client', data: e.data };
      if (s.client === 'detached') return { state: { ...s, upstreamEnded: true }, effects: [relay] };
      // A socket that never sends its config is waited for no longer than a dropped client.
      if (s.client === 'resuming')
        return { state: { ...s, upstreamEnded: true }, effects: [relay, { type: 'start_resume_grace' }] };
      if (s.client === 'open' && s.hopClient)
        return { state: { ...s, upstreamEnded: true }, effects: [relay, { type: 'await_delivery' }] };
      const done = finishEnded(s);
      return clientThere(s) ? withFirst(done, relay) : done;
    }

    case 'upstream_dropped':
      // A session whose upstream already ended (its client away) has nothing left to carry over.
      if (s.upstreamEnded) return { state: s, effects: [] };
      // The client is not told: a new upstream session takes over from the audio no final covers.
      if (s.phase === 'configured' || s.phase === 'ending') {
        return {
          state: { ...s, phase: 'reconnecting', afterReconnect: s.phase },
          effects: [{ type: 'reconnect_upstream' }],
        };
      }
      return transition(s, { ...e, type: 'upstream_failed' });

    case 'upstream_reconnected':
      if (s.phase !== 'reconnecting') return { state: s, effects: [] };
      return {
        state: { ...s, phase: s.afterReconnect ?? 'configured', afterReconnect: undefined },
        effects: s.afterReconnect === 'ending' ? [{ type: 'end_upstream' }] : [],
      };

    case 'upstream_failed': {
      // Whatever the session was ending for, no final usage came: the record says the upstream failed.
      const outcome = e.errorId === 'UPSTREAM_TIMEOUT' ? 'upstream_timeout' : 'upstream_lost';
      const failed = finish({ ...s, outcome }, outcome, { code: CLOSE.badGateway, reason: e.errorId.toLowerCase() });
      return clientThere(s) ? withFirst(failed, error(e.errorId, e.details)) : failed;
    }
  }
}

/** The client is told (`told`, while it is connected) and closed; an upstream session already
 * open is still ended gracefully so its usage is final, else the session finishes now. */
function endWithoutClient(s: SessionState, outcome: Outcome, told: Effect[], client: ClientState = 'gone'): Result {
  const say = clientThere(s) ? told : [];
  const gone: SessionState = { ...s, client };
  if (s.phase === 'configured') {
    const ending = beginEnding(gone, outcome);
    return { state: ending.state, effects: [...say, ...ending.effects] };
  }
  if (s.phase === 'ending') return { state: { ...gone, outcome }, effects: say };
  const done = finish(gone, outcome);
  return { state: done.state, effects: [...say, ...done.effects] };
}

function onClientMessage(s: SessionState, m: ClientMessage, verdict?: ConfigVerdict): Result {
  // A second `end` changes nothing (a client that resumed after sending one sends it again).
  if (s.phase === 'ending' && m.type === 'end') return { state: s, effects: [] };
  if (s.phase === 'ending')
    return { state: s, effects: [error('MESSAGE_AFTER_END', `"${m.type}" after end was ignored`)] };
  switch (m.type) {
    case 'config': {
      if (s.phase !== 'awaiting_config') {
        return {
          state: s,
          effects: [
            {
              type: 'send_client',
              message: serverMessages.configStatus('CONFIG_ALREADY_RECEIVED', {
                reason: 'a config was already received on this connection',
              }),
            },
          ],
        };
      }
      if (!verdict) throw new Error('config message without a verdict');
      if (verdict.ok) {
        return {
          state: { ...s, phase: 'connecting' },
          effects: [
            { type: 'clear_timer', timer: 'config_deadline' },
            { type: 'open_upstream', config: verdict.upstreamConfig },
          ],
        };
      }
      const denied = verdict.status === 'denied';
      return withFirst(
        finish(s, denied ? 'config_denied' : 'config_rejected', {
          code: denied ? CLOSE.configDenied : CLOSE.configRejected,
          reason: denied ? 'invalid configuration' : 'unsupported audioFormat',
        }),
        {
          type: 'send_client',
          message: serverMessages.configStatus(denied ? 'CONFIG_DENIED' : 'CONFIG_REJECTED', {
            reason: verdict.reason,
          }),
        },
      );
    }
    case 'flush':
      // While reconnecting the flush waits for the new upstream session, in its place in the stream.
      if (s.phase === 'configured' || s.phase === 'reconnecting')
        return { state: s, effects: [{ type: 'flush_upstream' }] };
      return {
        state: s,
        effects: [
          {
            type: 'send_client',
            message: serverMessages.configStatus('CONFIG_MISSING', { reason: 'flush needs an accepted config' }),
          },
        ],
      };
    case 'end':
      if (s.migration === 'handing_over' && clientThere(s)) return endInsteadOfMove(s);
      if (s.phase === 'configured') return beginEnding(s, 'ended');
      if (s.phase === 'reconnecting') return endAfterReconnect(s, 'ended');
      // Nothing was sent upstream: end is answered locally, as the upstream would, and the socket closes.
      return withFirst(finish(s, 'ended', { code: CLOSE.normal, reason: 'session ended' }), {
        type: 'send_client',
        message: serverMessages.ended(s.endpoint),
      });
  }
}

function withFirst(r: Result, first: Effect): Result {
  return { state: r.state, effects: [first, ...r.effects] };
}

/** The moves to another replica (see Migration). */
function migration(
  s: SessionState,
  e: Extract<SessionEvent, { type: 'handover_announced' | 'handover_started' | 'handover_close' | 'disowned' }>,
): Result {
  const none = { state: s, effects: [] };
  switch (e.type) {
    case 'handover_announced':
      return s.migration ? none : { state: { ...s, migration: 'leaving' }, effects: [] };
    case 'handover_started': {
      // Only a session whose audio flows can go on elsewhere; any other drains here.
      if ((s.migration && s.migration !== 'leaving') || (s.phase !== 'configured' && s.phase !== 'reconnecting'))
        return none;
      const next: SessionState = { ...s, migration: 'handing_over' };
      if (clientThere(s)) return { state: next, effects: [{ type: 'keep_output' }, { type: 'start_handover_wait' }] };
      return withFirst(closeForMove(next, CLOSE.serviceRestart, HANDED_OVER_REASON), { type: 'keep_output' });
    }
    case 'handover_close':
      return s.migration === 'handing_over' && clientThere(s)
        ? closeForMove(s, CLOSE.serviceRestart, HANDED_OVER_REASON)
        : none;
    case 'disowned':
      if (s.migration === 'disowned' || s.migration === 'key_lost') return none;
      if (!e.sameSession) return keyLost(s);
      return disowned(s);
  }
}

/** The client ended its session while the drain was handing it over, before its 1012: nothing is
 * left to move, and a successor would never hear the end (the client sends it once). It ends here
 * instead, and what its client was not sent for the successor goes to it now. */
function endInsteadOfMove(s: SessionState): Result {
  const here: SessionState = { ...s, migration: 'leaving' };
  const end = s.phase === 'configured' ? beginEnding(here, 'ended') : endAfterReconnect(here, 'ended');
  return { state: end.state, effects: [{ type: 'fail_handover' }, { type: 'send_kept_output' }, ...end.effects] };
}

/** The client is closed (no more audio comes here), then the upstream session ends (its usage final). */
function closeForMove(s: SessionState, code: number, reason: string): Result {
  const effects: Effect[] = clientThere(s) ? [{ type: 'close_client', code, reason }] : [];
  effects.push({ type: 'hurry_audio' });
  const gone: SessionState = { ...s, client: 'gone' };
  const end =
    s.phase === 'configured'
      ? beginEnding(gone, 'shutdown')
      : s.phase === 'reconnecting'
        ? endAfterReconnect(gone, 'shutdown')
        : { state: gone, effects: [] };
  return { state: end.state, effects: [...effects, ...end.effects] };
}

/** Another replica has the session now: its upstream session ends here, its output kept for the client there. */
function disowned(s: SessionState): Result {
  const next: SessionState = { ...s, migration: 'disowned' };
  if (s.phase !== 'configured' && s.phase !== 'reconnecting' && s.phase !== 'ending') {
    const say: Effect[] = clientThere(s)
      ? [{ type: 'close_client', code: CLOSE.replaced, reason: 'taken over by another gateway replica' }]
      : [];
    return {
      state: { ...next, phase: 'closed', migration: 'left', client: 'gone' },
      effects: [...say, { type: 'give_up_slot' }, { type: 'leave' }],
    };
  }
  const moved = closeForMove(next, CLOSE.replaced, 'taken over by another gateway replica');
  return { state: moved.state, effects: [{ type: 'give_up_slot' }, { type: 'keep_output' }, ...moved.effects] };
}

/** Another session has this session's resume key: the client is told, the session ends (usage final). */
function keyLost(s: SessionState): Result {
  const next: SessionState = { ...s, migration: 'key_lost' };
  const say: Effect[] = clientThere(s)
    ? [
        {
          type: 'tell_client_now',
          message: errorMessage(
            'RESUME_KEY_IN_USE',
            'another session took this resume key; this session has ended: open a new one with a new key',
          ),
        },
        { type: 'close_client', code: CLOSE.replaced, reason: 'resume key taken by another session' },
      ]
    : [];
  const closed = transition({ ...next, client: 'gone' }, { type: 'client_closed' });
  return { state: closed.state, effects: [...say, { type: 'fail_handover' }, ...closed.effects] };
}
