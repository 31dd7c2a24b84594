// Socket behaviour: an accepted socket is handed to a Session; its frames and its close go to that
// session, and every callback is guarded so that a throw ends one socket, never the process.
import uWS from 'uWebSockets.js';
import { awaitHandover, countTakeover, keepRecord, restoreOf } from '../cluster/index.js';
import type { Endpoint } from '../protocol/index.js';
import { CLOSE, Session, type ClientSink } from '../session/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import { SEND_DROPPED } from '../http/index.js';
import { Inflow, MAX_QUEUED_BYTES } from './inflow.js';
import { claimTaken, dropClaim } from './resume-claim.js';
import { upgradeGate } from './upgrade.js';
import type { ServerDeps, ServerState, SocketData, Ws } from './types.js';

/** Client frames larger than 64000 bytes are split, not refused (a whole WAV file in one frame is
 * common). This bounds one frame's memory (uWS closes a socket that sends more with 1009); it is
 * above the audio and text bounds so that an oversized config or audio frame gets a specific answer. */
const MAX_CLIENT_FRAME_BYTES = 16 * 1024 * 1024;
/** Output waiting for a client that does not read; past it the client is closed as too slow. */
const MAX_CLIENT_BACKLOG_BYTES = 1024 * 1024;

/** The socket whose uWS callback is running: uWS corks a socket for its own callbacks. */
let inCallback: Ws | undefined;

/** A socket callback that throws ends that socket's session, never the process. */
export function guarded<A extends unknown[]>(log: Logger, where: string, fn: (ws: Ws, ...a: A) => void) {
  return (ws: Ws, ...a: A) => {
    const outer = inCallback;
    inCallback = ws;
    try {
      fn(ws, ...a);
    } catch (err) {
      failed(log, where, ws, err);
    } finally {
      inCallback = outer;
    }
  };
}

/** `data` when the socket may have closed already: uWS throws on any use of a closed socket. */
function failed(log: Logger, where: string, ws: Ws, err: unknown, data: SocketData = ws.getUserData()): void {
  log.error({ event: 'socket_callback_failed', where, err }, 'socket callback threw; closing that socket');
  metrics.internalErrors.inc({ where: 'socket' });
  if (data.closed) return;
  data.closed = true;
  ws.end(CLOSE.internal, 'internal error');
}

/** A session's client socket. A send from inside the socket's own uWS callback goes straight out
 * (uWS has corked it); one from elsewhere (an upstream message, a timer) is corked here, through one
 * function made per socket rather than a closure per message. */
class ClientSocket implements ClientSink {
  private pending: string | Buffer = '';
  private result = 0;
  private readonly sendPending = () => {
    this.result = this.ws.send(this.pending, false);
  };

  constructor(
    private readonly ws: Ws,
    private readonly data: SocketData,
  ) {}

  sendText(text: string | Buffer): boolean {
    if (this.data.closed) return false;
    if (inCallback === this.ws) {
      this.result = this.ws.send(text, false);
    } else {
      this.pending = text;
      this.ws.cork(this.sendPending);
      this.pending = '';
    }
    if (this.result === SEND_DROPPED) return false;
    this.data.hopOutbox?.sent(text);
    return this.ws.getBufferedAmount() <= MAX_CLIENT_BACKLOG_BYTES;
  }

  undelivered(): Array<string | Buffer> {
    return this.data.hopOutbox?.undelivered() ?? [];
  }

  backlog(): number {
    return this.data.closed ? 0 : this.ws.getBufferedAmount();
  }

  close(code: number, reason: string): void {
    if (this.data.closed) return;
    this.data.closed = true;
    this.ws.cork(() => this.ws.end(code, reason));
  }
}

/** The socket no longer counts as unconfigured: a valid config arrived, or it closed. */
function countedOut(state: ServerState, data: SocketData): void {
  if (data.unconfigured === undefined) return;
  state.unconfigured.release(data.unconfigured);
  data.unconfigured = undefined;
}

/** A socket opened while the gateway drains is closed at once with 1012, so its client retries elsewhere. */
function sendAway(state: ServerState, ws: Ws, data: SocketData): void {
  countedOut(state, data);
  metrics.refusals.inc({ reason: 'draining' });
  data.closed = true;
  ws.end(CLOSE.serviceRestart, 'gateway restarting; reconnect');
}

/** A resume: the socket takes its session over, unless the session ended since the upgrade. */
function takeOver(ws: Ws, data: SocketData, state: ServerState): void {
  const session = data.resumeOf!;
  if (!state.sessions.has(session)) {
    data.closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session ended; reconnect');
  }
  data.session = session;
  session.attach(data.sink!);
}

/** A session taken over from another replica's record: it keeps its ledger session and its slot. */
function restored(deps: ServerDeps, data: SocketData): Session {
  const { record, from } = data.restore!;
  const session = new Session(deps, data.info, data.sink!, restoreOf(record, from));
  void deps.limiter.adopt(record.tenant, record.sessionKey);
  countTakeover({ ...deps.cluster, logger: deps.logger }, record, from);
  return session;
}

/** A resume accepted while the session's owner hands it over: once the record is handed over, the
 * session is restored here and gets the frames its client sent meanwhile; else the client is asked to
 * reconnect (its next attempt finds where the session went). */
async function awaitRestore(deps: ServerDeps, state: ServerState, ws: Ws, data: SocketData): Promise<void> {
  const cluster = { ...deps.cluster, logger: deps.logger };
  const found = await awaitHandover(
    cluster,
    data.info.resumeKey!,
    deps.settings.endTimeoutMs,
    () => !data.closed,
  ).catch(
    (err: Error) => (
      deps.logger.warn({ event: 'resume_lookup_failed', err: err.message }, 'session record lookup failed'),
      undefined
    ),
  );
  if (data.closed) return; // a claimed record stays this replica's: the client's next resume takes it over here
  const held = data.awaiting!;
  data.awaiting = undefined;
  if (found?.route !== 'restore') {
    data.closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session is moving between gateway replicas; reconnect');
  }
  guarded(deps.logger, 'open', () => {
    data.restore = found;
    const session = (data.session = restored(deps, data));
    track(deps, state, session);
    for (const f of held.frames) {
      if (f.binary) session.onClientBinary(f.data);
      else session.onClientText(f.data);
    }
  })(ws);
}

/** A frame of a client waiting for its session, copied (uWS reuses it) within the audio bound. */
function hold(
  deps: ServerDeps,
  ws: Ws,
  awaiting: NonNullable<SocketData['awaiting']>,
  message: ArrayBuffer,
  binary: boolean,
): void {
  awaiting.bytes += message.byteLength;
  if (awaiting.bytes > deps.settings.maxBufferedAudioBytes) {
    ws.getUserData().closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session is moving between gateway replicas; reconnect');
  }
  awaiting.frames.push({ data: message.slice(0), binary });
}

/** The server's sets know the session until it finishes; another replica knows a resumable one by its record. */
function track(deps: ServerDeps, state: ServerState, session: Session): void {
  state.sessions.add(session);
  const key = session.info.resumeKey;
  if (key) state.resumable.set(key, session);
  const forget =
    key && deps.cluster.records.shared ? keepRecord({ ...deps.cluster, logger: deps.logger }, session) : undefined;
  session.on((e) => {
    if (e.type !== 'finished') return;
    state.sessions.delete(session);
    if (key && state.resumable.get(key) === session) state.resumable.delete(key);
    forget?.();
  });
}

/** The socket's frames to its hop, its held frames or its session, at most a budget a turn (inflow.ts). */
function inflowOf(deps: ServerDeps, ws: Ws, data: SocketData): Inflow {
  const deliver = (message: ArrayBuffer, isBinary: boolean) => {
    const { session, hop, awaiting } = data;
    if (hop) return hop.fromClient(message, isBinary);
    if (awaiting) return hold(deps, ws, awaiting, message, isBinary);
    if (!session) return;
    // uWS reuses `message` after this callback: the session copies what it keeps.
    if (isBinary) session.onClientBinary(message);
    else session.onClientText(message);
  };
  return new Inflow({
    deliver: (message, isBinary) => {
      if (inCallback === ws) return deliver(message, isBinary);
      // A queued frame, handled after the callback (the socket may have closed): a throw ends this socket, as in the callback.
      try {
        deliver(message, isBinary);
      } catch (err) {
        failed(deps.logger, 'message', ws, err, data);
      }
    },
    flooded: () => {
      deps.logger.warn(
        { event: 'client_flood', session: data.info.sessionKey },
        'client sent more than the gateway reads; closing it',
      );
      metrics.refusals.inc({ reason: 'client_flood' });
      if (data.closed) return;
      data.closed = true;
      ws.end(CLOSE.flooded, `client sends faster than the gateway reads (over ${MAX_QUEUED_BYTES} bytes waiting)`);
    },
  });
}

export function socketBehavior(
  deps: ServerDeps,
  state: ServerState,
  endpoint: Endpoint,
): uWS.WebSocketBehavior<SocketData> {
  const log = deps.logger;
  return {
    compression: uWS.DISABLED,
    maxPayloadLength: MAX_CLIENT_FRAME_BYTES,
    maxBackpressure: 2 * MAX_CLIENT_BACKLOG_BYTES,
    idleTimeout: deps.clientIdleSeconds,
    sendPingsAutomatically: true,
    upgrade: upgradeGate(deps, state, endpoint),
    open: guarded(log, 'open', (ws) => {
      const data = ws.getUserData();
      data.inflow = inflowOf(deps, ws, data);
      if (data.claim && state.draining) dropClaim(deps, state, data.claim);
      else if (data.claim) claimTaken(state, data.claim); // the session holds its key from here (track)
      if (state.draining) return sendAway(state, ws, data);
      if (data.hop) return data.hop.attach(ws);
      data.sink = new ClientSocket(ws, data);
      if (data.resumeOf) return takeOver(ws, data, state);
      if (data.awaiting) return void awaitRestore(deps, state, ws, data);
      data.session = data.restore ? restored(deps, data) : new Session(deps, data.info, data.sink);
      data.session.on((e) => e.type === 'configured' && countedOut(state, data));
      track(deps, state, data.session);
    }),
    // Not through guarded(): no rest-arguments array per frame.
    message: (ws, message, isBinary) => {
      const outer = inCallback;
      inCallback = ws;
      try {
        ws.getUserData().inflow!.accept(message, isBinary);
      } catch (err) {
        failed(log, 'message', ws, err);
      } finally {
        inCallback = outer;
      }
    },
    drain: guarded(log, 'drain', (ws) => ws.getUserData().hop?.clientDrained()),
    close: guarded(log, 'close', (ws, code: number, reason: ArrayBuffer) => {
      const data = ws.getUserData();
      data.closed = true;
      countedOut(state, data);
      // Frames still waiting in the inflow go first (an end, say), then the close.
      const copied = reason.slice(0);
      const closed = () => {
        try {
          data.hop?.clientClosed(code, copied);
          if (data.sink) data.session?.onClientClosed(data.sink);
        } catch (err) {
          failed(log, 'close', ws, err, data); // after the queue, outside uWS's callback: never the process
        }
      };
      if (data.inflow) data.inflow.close(closed);
      else closed();
    }),
  };
}
