// Every rule of a session's life (config, audio, flush, end, the upstream lost and regained, a client
// that drops and resumes, the move to another replica; see docs/protocol.md and docs/design.md) as a
// transition of the pure session machine. Timers are events here (config_deadline, time_limit), so
// the "clock" is whatever order the test feeds them in.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { CLOSE } from '../../src/protocol/index.js';
import {
  HANDED_OVER_REASON,
  initialState,
  restoredState,
  transition,
  type Effect,
  type SessionEvent,
  type SessionState,
} from '../../src/session/machine.js';

/** What the events carry: the client's audio, an upstream message's bytes (the effects must pass on these very buffers). */
const AUDIO = Buffer.from('OggS audio');
const UPSTREAM = Buffer.from('{"type":"upstream message"}');

const run = (s: SessionState, ...events: SessionEvent[]) => {
  let state = s;
  let effects: Effect[] = [];
  for (const e of events) ({ state, effects } = transition(state, e));
  return { state, effects };
};
const sent = (effects: Effect[]) =>
  effects.filter((e) => e.type === 'send_client').map((e) => (e as { message: Record<string, any> }).message);
const types = (effects: Effect[]) => effects.map((e) => e.type);

const okConfig: SessionEvent = {
  type: 'client_message',
  message: { type: 'config', configuration: {} },
  verdict: { ok: true, upstreamConfig: { primaryLanguage: 'en' } },
};
const accepted: SessionEvent = { type: 'upstream_config_status', status: 'CONFIG_ACCEPTED', data: UPSTREAM };

describe('session machine', () => {
  it('opened + valid config → connecting, opens the upstream with the validated config', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig);
    assert.equal(state.phase, 'connecting');
    assert.deepEqual(
      effects.find((e) => e.type === 'open_upstream'),
      { type: 'open_upstream', config: { primaryLanguage: 'en' } },
    );
    assert.ok(types(effects).includes('clear_timer'), 'config deadline is cancelled');
  });

  it('upstream CONFIG_ACCEPTED is relayed and the session is configured', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, accepted);
    assert.equal(state.phase, 'configured');
    assert.deepEqual(types(effects), ['relay_client']);
  });

  it('invalid config → CONFIG_DENIED with the reason, nothing opened upstream, socket closed', () => {
    const { state, effects } = run(initialState('streams'), {
      type: 'client_message',
      message: { type: 'config', configuration: {} },
      verdict: { ok: false, status: 'denied', reason: 'configuration.mode.type: required' },
    });
    assert.equal(state.phase, 'closed');
    assert.equal(state.outcome, 'config_denied');
    assert.deepEqual(sent(effects), [{ type: 'CONFIG_DENIED', reason: 'configuration.mode.type: required' }]);
    assert.ok(!types(effects).includes('open_upstream'));
    assert.equal((effects.find((e) => e.type === 'close_client') as { code: number }).code, CLOSE.configDenied);
  });

  it('a valid config with the tenant at its cap: TENANT_SESSION_LIMIT, close 1013, no upstream; once connected it changes nothing', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, {
      type: 'slot_refused',
      details: 'at the cap',
    });
    assert.equal(state.phase, 'closed');
    assert.deepEqual(
      sent(effects).map((m) => m.error?.id),
      ['TENANT_SESSION_LIMIT'],
    );
    assert.deepEqual(
      effects.find((e) => e.type === 'close_client'),
      { type: 'close_client', code: 1013, reason: 'tenant session limit' },
    );
    assert.ok(!types(effects).includes('open_upstream'));
    const later = run(initialState('transcribe'), okConfig, accepted, { type: 'slot_refused', details: 'late' });
    assert.equal(later.state.phase, 'configured');
    assert.deepEqual(later.effects, []);
  });

  it('unsupported audioFormat → CONFIG_REJECTED', () => {
    const { state, effects } = run(initialState('transcribe'), {
      type: 'client_message',
      message: { type: 'config', configuration: {} },
      verdict: { ok: false, status: 'rejected', reason: 'configuration.audioFormat: unsupported' },
    });
    assert.equal(state.outcome, 'config_rejected');
    assert.equal(sent(effects)[0].type, 'CONFIG_REJECTED');
  });

  it('no config by the deadline: CONFIG_TIMEOUT on /transcribe, CONFIG_NOT_PROVIDED on /streams, then close', () => {
    for (const [endpoint, type] of [
      ['transcribe', 'CONFIG_TIMEOUT'],
      ['streams', 'CONFIG_NOT_PROVIDED'],
    ] as const) {
      const { state, effects } = run(initialState(endpoint), { type: 'config_deadline' });
      assert.equal(state.phase, 'closed');
      assert.deepEqual(sent(effects), [{ type }]);
      assert.ok(types(effects).indexOf('send_client') < types(effects).indexOf('close_client'), 'message before close');
    }
  });

  it('the deadline firing after a config changes nothing', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, { type: 'config_deadline' });
    assert.equal(state.phase, 'connecting');
    assert.deepEqual(effects, []);
  });

  it('a second config → CONFIG_ALREADY_RECEIVED, session unchanged', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, accepted, okConfig);
    assert.equal(state.phase, 'configured');
    assert.equal(sent(effects)[0].type, 'CONFIG_ALREADY_RECEIVED');
    assert.ok(!types(effects).includes('open_upstream'));
  });

  it('audio before any config → CONFIG_MISSING, not forwarded', () => {
    const { effects } = run(initialState('transcribe'), { type: 'client_audio', audio: AUDIO });
    assert.equal(sent(effects)[0].type, 'CONFIG_MISSING');
    assert.ok(!types(effects).includes('forward_audio'));
  });

  it('audio while the upstream has not accepted yet → error, not forwarded', () => {
    const { effects } = run(initialState('transcribe'), okConfig, { type: 'client_audio', audio: AUDIO });
    assert.deepEqual(
      sent(effects).map((m) => (m as { error?: { id: string } }).error?.id),
      ['AUDIO_BEFORE_CONFIG'],
    );
    assert.ok(!types(effects).includes('forward_audio'));
  });

  it('configured + audio → forwarded, the very bytes the event carried', () => {
    const { effects } = run(initialState('transcribe'), okConfig, accepted, { type: 'client_audio', audio: AUDIO });
    assert.deepEqual(types(effects), ['forward_audio']);
    assert.equal((effects[0] as { audio: Buffer }).audio, AUDIO);
  });

  it('an upstream lost mid-session is replaced, not reported: audio and flush go on; an end asked for meanwhile is sent to the new one', () => {
    let r = run(initialState('transcribe'), okConfig, accepted, {
      type: 'upstream_dropped',
      errorId: 'UPSTREAM_CLOSED',
      details: 'gone',
    });
    assert.equal(r.state.phase, 'reconnecting');
    assert.deepEqual(types(r.effects), ['reconnect_upstream'], 'the client is told nothing');
    assert.deepEqual(types(run(r.state, { type: 'client_audio', audio: AUDIO }).effects), ['forward_audio']);
    assert.deepEqual(types(run(r.state, { type: 'client_message', message: { type: 'flush' } }).effects), [
      'flush_upstream',
    ]);
    r = run(r.state, { type: 'client_message', message: { type: 'end' } });
    assert.deepEqual(
      types(r.effects),
      ['open_restored_upstream'],
      'end waits for the new upstream session (the link opens one now only for a restored session)',
    );
    r = run(r.state, { type: 'upstream_reconnected' });
    assert.equal(r.state.phase, 'ending');
    assert.deepEqual(types(r.effects), ['end_upstream']);
    assert.equal(r.state.outcome, 'ended');
  });

  it('reconnection that fails: error and 1014, as any upstream failure', () => {
    const { state, effects } = run(
      initialState('transcribe'),
      okConfig,
      accepted,
      { type: 'upstream_dropped', errorId: 'UPSTREAM_CLOSED', details: 'gone' },
      { type: 'upstream_failed', errorId: 'UPSTREAM_CLOSED', details: 'gone; reconnecting failed' },
    );
    assert.equal(state.outcome, 'upstream_lost');
    assert.equal((effects.find((e) => e.type === 'close_client') as { code: number }).code, CLOSE.badGateway);
  });

  it('a resumable client that drops is waited for; back in time it goes on, else its upstream session is ended gracefully', () => {
    const detached = run(initialState('transcribe'), okConfig, accepted, { type: 'client_closed', resumable: true });
    assert.equal(detached.state.phase, 'configured');
    assert.equal(detached.state.client, 'detached');
    assert.deepEqual(
      types(detached.effects),
      ['hold_output', 'start_resume_grace'],
      'nothing ends yet; what it misses is kept',
    );
    const back = run(detached.state, { type: 'client_resumed' });
    assert.equal(back.state.client, 'resuming', "its output waits for the new socket's config");
    assert.deepEqual(back.effects, [{ type: 'clear_timer', timer: 'resume_grace' }]);
    assert.equal(run(back.state, { type: 'client_caught_up' }).state.client, 'open');
    const gone = run(detached.state, { type: 'resume_grace' });
    assert.equal(gone.state.phase, 'ending');
    assert.deepEqual(types(gone.effects), ['end_upstream']);
    assert.equal(gone.state.outcome, 'client_gone');
  });

  it("an upstream that closes after ending a detached client's session is not reconnected", () => {
    // The client sent end and dropped before `ended` came: the upstream's normal close that follows is no loss.
    const ending = run(
      initialState('transcribe'),
      okConfig,
      accepted,
      { type: 'client_message', message: { type: 'end' } },
      { type: 'client_closed', resumable: true },
    );
    const ended = run(ending.state, { type: 'upstream_ended', data: UPSTREAM });
    assert.equal(ended.state.upstreamEnded, true);
    const closed = run(ended.state, { type: 'upstream_dropped', errorId: 'UPSTREAM_UNAVAILABLE', details: 'closed' });
    assert.ok(
      !types(closed.effects).includes('reconnect_upstream'),
      'no new upstream session for a session that ended',
    );
    assert.notEqual(closed.state.phase, 'reconnecting');
    const back = run(closed.state, { type: 'client_resumed' }, { type: 'client_caught_up' });
    assert.equal(back.state.phase, 'closed', 'the returning client gets the end it missed, then the session is over');
  });

  it('the upstream ending while a resumed socket has not sent its config: the end waits for that config', () => {
    const resuming = run(
      initialState('transcribe'),
      okConfig,
      accepted,
      { type: 'client_message', message: { type: 'end' } },
      { type: 'client_closed', resumable: true },
      { type: 'client_resumed' },
    ).state;
    const ended = run(resuming, { type: 'upstream_ended', data: UPSTREAM });
    assert.notEqual(ended.state.phase, 'closed', 'not closed before the new socket had its output');
    assert.deepEqual(types(ended.effects), ['relay_client', 'start_resume_grace'], 'kept with what it missed');
    const done = run(ended.state, { type: 'client_caught_up' });
    assert.equal(done.state.phase, 'closed');
    assert.deepEqual(types(done.effects).slice(-2), ['close_client', 'finish']);
    const late = run(done.state, { type: 'resume_grace' });
    assert.deepEqual(late.effects, [], 'the grace after the config changes nothing');
    const never = run(ended.state, { type: 'resume_grace' });
    assert.equal(never.state.phase, 'closed', 'a socket that never sends its config is not waited for past the grace');
    assert.deepEqual(types(never.effects).slice(-2), ['close_client', 'finish']);
  });

  it('a client behind the internal hop: the session ends once the relaying replica confirms it had the end; one that left first gets it on its next socket', () => {
    const viaHop = run(
      initialState('transcribe'),
      okConfig,
      accepted,
      { type: 'client_closed', resumable: true },
      { type: 'client_resumed', viaHop: true },
      { type: 'client_caught_up' },
      { type: 'client_message', message: { type: 'end' } },
    ).state;
    const ended = run(viaHop, { type: 'upstream_ended', data: UPSTREAM });
    assert.deepEqual(types(ended.effects), ['relay_client', 'await_delivery']);
    assert.notEqual(ended.state.phase, 'closed');
    const delivered = run(ended.state, { type: 'client_delivered' });
    assert.equal(delivered.state.phase, 'closed');
    assert.deepEqual(
      delivered.effects.find((e) => e.type === 'close_client'),
      {
        type: 'close_client',
        code: 1000,
        reason: 'session ended',
      },
    );
    const left = run(ended.state, { type: 'client_closed', resumable: true });
    assert.equal(left.state.client, 'detached');
    assert.deepEqual(types(left.effects), ['hold_output', 'start_resume_grace']);
    const back = run(left.state, { type: 'client_resumed' }, { type: 'client_caught_up' });
    assert.equal(back.state.phase, 'closed', 'a direct socket: over once it was sent the kept output');
  });

  it('a client that cannot come back is not waited for: no resume key, too slow, or before its session is configured', () => {
    const configured = run(initialState('transcribe'), okConfig, accepted).state;
    const noKey = run(configured, { type: 'client_closed' });
    assert.equal(noKey.state.client, 'gone');
    assert.deepEqual(types(noKey.effects), ['end_upstream'], 'ended upstream so its usage is final');
    const slow = run(configured, { type: 'client_too_slow', details: 'not reading' });
    assert.equal(slow.state.client, 'slow');
    const slowClosed = run(slow.state, { type: 'client_closed', resumable: true });
    assert.equal(slowClosed.state.client, 'slow', 'a client closed for not reading is not waited for');
    assert.ok(!types(slowClosed.effects).includes('start_resume_grace'));
    const early = run(initialState('transcribe'), { type: 'client_closed', resumable: true });
    assert.equal(early.state.phase, 'closed', 'nothing to resume before the config');
  });

  it('a resuming socket that drops before its config is waited for again; the grace ends a detached client only', () => {
    const configured = run(initialState('transcribe'), okConfig, accepted).state;
    const resuming = run(configured, { type: 'client_closed', resumable: true }, { type: 'client_resumed' }).state;
    const again = run(resuming, { type: 'client_closed', resumable: true });
    assert.equal(again.state.client, 'detached');
    assert.deepEqual(
      types(run(resuming, { type: 'resume_grace' }).effects),
      [],
      'a socket is there: the grace does nothing',
    );
  });

  it("a session taken over from another replica waits for its client's config and opens its upstream as a reconnection", () => {
    const s = restoredState('streams');
    assert.equal(s.phase, 'reconnecting');
    assert.equal(s.client, 'resuming');
    const ready = run(s, { type: 'upstream_reconnected' });
    assert.equal(ready.state.phase, 'configured');
    const ended = run(s, { type: 'client_message', message: { type: 'end' } }, { type: 'upstream_reconnected' });
    assert.deepEqual(
      types(ended.effects),
      ['end_upstream'],
      'an end asked for while reconnecting is sent once the new upstream session is there',
    );
    assert.deepEqual(
      types(run(s, { type: 'client_message', message: { type: 'end' } }).effects),
      ['open_restored_upstream'],
      'that session opens now: no media may come to open it',
    );
  });

  it('flush stays open and is forwarded behind pending audio', () => {
    const { state, effects } = run(initialState('streams'), okConfig, accepted, {
      type: 'client_message',
      message: { type: 'flush' },
    });
    assert.equal(state.phase, 'configured');
    assert.deepEqual(types(effects), ['flush_upstream']);
  });

  it('end → ending; upstream ended → relayed, then both sides close', () => {
    let r = run(initialState('transcribe'), okConfig, accepted, { type: 'client_message', message: { type: 'end' } });
    assert.equal(r.state.phase, 'ending');
    assert.deepEqual(types(r.effects), ['end_upstream']);
    r = run(r.state, { type: 'upstream_ended', data: UPSTREAM });
    assert.equal(r.state.phase, 'closed');
    assert.equal(r.state.outcome, 'ended');
    const t = types(r.effects);
    assert.ok(t.indexOf('relay_client') < t.indexOf('close_client'));
    assert.equal((r.effects.find((e) => e.type === 'close_client') as { code: number }).code, CLOSE.normal);
  });

  it('messages after end get an error and are not forwarded', () => {
    const { effects } = run(
      initialState('transcribe'),
      okConfig,
      accepted,
      { type: 'client_message', message: { type: 'end' } },
      { type: 'client_message', message: { type: 'flush' } },
    );
    assert.equal((sent(effects)[0] as { error: { id: string } }).error.id, 'MESSAGE_AFTER_END');
    assert.ok(!types(effects).includes('flush_upstream'));
  });

  it('/streams reaching its time limit ends like `end`, outcome time_limit', () => {
    let r = run(initialState('streams'), okConfig, accepted, { type: 'time_limit' });
    assert.equal(r.state.phase, 'ending');
    assert.deepEqual(types(r.effects), ['end_upstream']);
    r = run(r.state, { type: 'upstream_ended', data: UPSTREAM });
    assert.equal(r.state.outcome, 'time_limit');
  });

  it('a client that disconnects while configured: the upstream is ended gracefully (usage becomes final)', () => {
    let r = run(initialState('transcribe'), okConfig, accepted, { type: 'client_closed' });
    assert.equal(r.state.phase, 'ending');
    assert.deepEqual(types(r.effects), ['end_upstream']);
    r = run(r.state, { type: 'upstream_ended', data: UPSTREAM });
    assert.equal(r.state.outcome, 'client_gone');
    assert.ok(!types(r.effects).includes('close_client'), 'nothing is sent to a gone client');
    assert.ok(!types(r.effects).includes('relay_client'));
  });

  it('an upstream that fails: error in the catalogue shape and a close code that says so', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, accepted, {
      type: 'upstream_failed',
      errorId: 'UPSTREAM_CLOSED',
      details: 'gone',
    });
    assert.equal(state.outcome, 'upstream_lost');
    const msg = sent(effects)[0] as {
      type: string;
      error: { id: string; title: string; status: number; details: string; doc: string };
    };
    assert.equal(msg.type, 'error');
    assert.deepEqual(Object.keys(msg.error).sort(), ['details', 'doc', 'id', 'status', 'title']);
    assert.equal((effects.find((e) => e.type === 'close_client') as { code: number }).code, CLOSE.badGateway);
  });

  it('upstream CONFIG_DENIED is relayed and closes the session', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, {
      type: 'upstream_config_status',
      status: 'CONFIG_DENIED',
      data: UPSTREAM,
    });
    assert.equal(state.outcome, 'config_denied');
    assert.equal(types(effects)[0], 'relay_client');
  });

  it('audio that fails validation: error to the client, client closed, the upstream session ended gracefully', () => {
    let r = run(initialState('transcribe'), okConfig, accepted, {
      type: 'audio_failed',
      errorId: 'AUDIO_FORMAT_MISMATCH',
      details: 'declared ogg, got webm',
    });
    assert.equal(r.state.phase, 'ending');
    assert.equal((sent(r.effects)[0] as { error: { id: string } }).error.id, 'AUDIO_FORMAT_MISMATCH');
    assert.equal((r.effects.find((e) => e.type === 'close_client') as { code: number }).code, CLOSE.audioInvalid);
    assert.ok(types(r.effects).includes('end_upstream'), 'usage of the upstream session becomes final');
    assert.ok(!types(r.effects).includes('forward_audio'));
    r = run(r.state, { type: 'upstream_ended', data: UPSTREAM });
    assert.equal(r.state.phase, 'closed');
    assert.equal(r.state.outcome, 'error');
    assert.ok(!types(r.effects).includes('relay_client'), 'nothing more to a closed client');
  });

  it('invalid client messages get a specific error and do not change the state', () => {
    const s0 = run(initialState('transcribe'), okConfig, accepted).state;
    const { state, effects } = transition(s0, {
      type: 'client_invalid',
      errorId: 'INVALID_MESSAGE',
      details: 'message is not valid JSON',
    });
    assert.deepEqual(state, s0);
    assert.equal((sent(effects)[0] as { error: { details: string } }).error.details, 'message is not valid JSON');
  });

  it('end before any config is answered locally and closes', () => {
    const { state, effects } = run(initialState('streams'), { type: 'client_message', message: { type: 'end' } });
    assert.equal(state.phase, 'closed');
    assert.deepEqual(sent(effects), [{ type: 'ENDED' }]);
  });

  it('a closed session ignores everything', () => {
    const closed = run(initialState('transcribe'), { type: 'config_deadline' }).state;
    assert.deepEqual(transition(closed, { type: 'client_audio', audio: AUDIO }).effects, []);
  });

  it('shutdown ends configured sessions gracefully', () => {
    const { state, effects } = run(initialState('transcribe'), okConfig, accepted, { type: 'shutdown' });
    assert.equal(state.phase, 'ending');
    assert.deepEqual(types(effects), ['end_upstream']);
  });

  describe('moving to another replica', () => {
    const configured = () => run(initialState('transcribe'), okConfig, accepted).state;

    it('a handover: announced (record writes stop), started (output kept, the close waits for the next audio), closed, ended upstream, then left', () => {
      const announced = run(configured(), { type: 'handover_announced' });
      assert.equal(announced.state.migration, 'leaving');
      assert.deepEqual(announced.effects, []);
      const started = run(announced.state, { type: 'handover_started' });
      assert.equal(started.state.migration, 'handing_over');
      assert.deepEqual(types(started.effects), ['keep_output', 'start_handover_wait']);
      const closed = run(started.state, { type: 'handover_close' });
      assert.deepEqual(types(closed.effects), ['close_client', 'hurry_audio', 'end_upstream']);
      assert.deepEqual(closed.effects[0], {
        type: 'close_client',
        code: CLOSE.serviceRestart,
        reason: HANDED_OVER_REASON,
      });
      assert.equal(closed.state.client, 'gone');
      assert.deepEqual(types(run(closed.state, { type: 'handover_close' }).effects), [], 'closed once');
      const left = run(closed.state, { type: 'upstream_ended', data: UPSTREAM });
      assert.deepEqual(
        types(left.effects),
        ['leave'],
        'no end message to a client that is gone, no finish: the ledger session goes on elsewhere',
      );
      assert.equal(left.state.migration, 'left');
      assert.equal(left.state.phase, 'closed');
    });

    it('a handover with the client away: closed for the move at once; while reconnecting, `end` waits for the new upstream session', () => {
      const away = run(configured(), { type: 'client_closed', resumable: true }).state;
      assert.deepEqual(types(run(away, { type: 'handover_started' }).effects), [
        'keep_output',
        'hurry_audio',
        'end_upstream',
      ]);
      const reconnecting = run(configured(), {
        type: 'upstream_dropped',
        errorId: 'UPSTREAM_CLOSED',
        details: 'x',
      }).state;
      const moving = run(reconnecting, { type: 'handover_started' }, { type: 'handover_close' });
      assert.equal(moving.state.afterReconnect, 'ending');
      assert.deepEqual(types(run(moving.state, { type: 'upstream_reconnected' }).effects), ['end_upstream']);
    });

    it('`end` from the client before its 1012: the handover fails and the session ends here, its kept output sent', () => {
      const moving = run(configured(), { type: 'handover_started' }).state;
      const ended = run(moving, { type: 'client_message', message: { type: 'end' } });
      assert.deepEqual(types(ended.effects), ['fail_handover', 'send_kept_output', 'end_upstream']);
      assert.equal(ended.state.phase, 'ending');
      assert.deepEqual(types(run(ended.state, { type: 'handover_close' }).effects), [], 'no 1012 after it');
      const done = run(ended.state, { type: 'upstream_ended', data: UPSTREAM });
      assert.equal(done.state.outcome, 'ended');
      assert.deepEqual(types(done.effects), [
        'relay_client',
        'clear_timer',
        'close_upstream',
        'close_client',
        'finish',
      ]);
      assert.equal(done.effects.find((e) => e.type === 'close_client')?.code, CLOSE.normal);
    });

    it('a session that is not flowing is not handed over (it drains here)', () => {
      for (const s of [
        initialState('transcribe'),
        run(initialState('transcribe'), okConfig).state,
        run(configured(), { type: 'client_message', message: { type: 'end' } }).state,
      ]) {
        const r = run(s, { type: 'handover_started' });
        assert.notEqual(r.state.migration, 'handing_over', s.phase);
        assert.deepEqual(r.effects, []);
      }
    });

    it('an upstream failure during a handover ends the session here (the handover fails)', () => {
      const moving = run(configured(), { type: 'handover_started' }, { type: 'handover_close' }).state;
      const failed = run(moving, { type: 'upstream_failed', errorId: 'UPSTREAM_TIMEOUT', details: 'no answer' });
      assert.equal(failed.state.phase, 'closed');
      assert.ok(types(failed.effects).includes('finish'));
      assert.ok(!types(failed.effects).includes('close_client'), 'its client is gone already');
    });

    it('disowned (another replica took it over): client closed 4409, slot given up, upstream ended, then left', () => {
      const r = run(configured(), { type: 'disowned', sameSession: true });
      assert.equal(r.state.migration, 'disowned');
      assert.deepEqual(types(r.effects), [
        'give_up_slot',
        'keep_output',
        'close_client',
        'hurry_audio',
        'end_upstream',
      ]);
      assert.equal((r.effects[2] as { code: number }).code, CLOSE.replaced);
      assert.deepEqual(types(run(r.state, { type: 'upstream_ended', data: UPSTREAM }).effects), ['leave']);
      assert.deepEqual(run(r.state, { type: 'disowned', sameSession: true }).effects, [], 'once');
      const early = run(run(initialState('transcribe'), okConfig).state, { type: 'disowned', sameSession: true });
      assert.deepEqual(
        types(early.effects),
        ['close_client', 'give_up_slot', 'leave'],
        'not flowing yet: it leaves at once',
      );
    });

    it('its key claimed by another session: the client is told RESUME_KEY_IN_USE and closed, a handover under way fails, the session ends here', () => {
      const r = run(configured(), { type: 'handover_announced' }, { type: 'disowned', sameSession: false });
      assert.equal(r.state.migration, 'key_lost');
      assert.deepEqual(types(r.effects), ['tell_client_now', 'close_client', 'fail_handover', 'end_upstream']);
      assert.equal((r.effects[0] as { message: { error: { id: string } } }).message.error.id, 'RESUME_KEY_IN_USE');
      assert.equal(r.state.outcome, 'client_gone');
    });
  });
});
