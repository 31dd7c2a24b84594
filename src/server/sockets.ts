// Socket behaviour: an accepted socket is handed to a Session; its frames and its close go to that
// session, and every callback is guarded so that a throw ends one socket, never the process.
import uWS from 'uWebSockets.js';
import {
  awaitHandover,
  countTakeover,
  keepRecord,
  recordKeyHash,
  restoreOf,
  type HopOutbox,
} from '../cluster/index.js';
import { CLOSE, type Endpoint } from '../protocol/index.js';
import { Session, type ClientSink } from '../session/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import { SEND_DROPPED } from '../http/index.js';
import { Inflow, MAX_QUEUED_BYTES, MAX_QUEUED_FRAMES } from './inflow.js';
import { claimTaken, dropClaim } from './resume-claim.js';
import { upgradeGate } from './upgrade.js';
import { handOverFromDrain } from './drain.js';
import { sessionDeps } from './environments.js';
import type {
  AwaitingSocket,
  HopSocket,
  NewSocket,
  RestoreSocket,
  ResumeSocket,
  ServerDeps,
  ServerState,
  SocketData,
  Ws,
} from './types.js';

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

/** How long the owner's end of a hop waits for the relaying replica to confirm the last output. */
const DELIVERY_WAIT_MS = 5000;

/** A session's client socket. */
class ClientSocket implements ClientSink {
  readonly whenDelivered?: (done: () => void) => void;

  /** `outbox`: the owner's end of a hop keeps what it sends until the relaying replica confirms it. */
  constructor(
    private readonly ws: Ws,
    private readonly data: SocketData,
    private readonly outbox?: HopOutbox,
  ) {
    if (outbox) this.whenDelivered = (done) => this.confirmation(outbox, done);
  }

  /** The relaying replica answers a ping with its count of messages passed on (an older one at its
   * next 10 s ping); a hop that closes first has said its last count, or is gone: done either way. */
  private confirmation(outbox: HopOutbox, done: () => void): void {
    let called = false;
    const once = () => {
      if (called) return;
      called = true;
      clearTimeout(timer);
      done();
    };
    const timer = setTimeout(once, DELIVERY_WAIT_MS);
    outbox.whenConfirmed(once);
    if (!this.data.closed) this.ws.cork(() => this.ws.ping());
  }

  sendText(text: string | Buffer): boolean {
    if (this.data.closed) return false;
    if (this.ws.send(text, false) === SEND_DROPPED) return false;
    this.outbox?.sent(text);
    return this.ws.getBufferedAmount() <= MAX_CLIENT_BACKLOG_BYTES;
  }

  undelivered(): Array<string | Buffer> {
    return this.outbox?.undelivered() ?? [];
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
  if (data.kind !== 'new' || data.unconfigured === undefined) return;
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
function takeOver(ws: Ws, data: ResumeSocket | HopSocket, state: ServerState): void {
  const sink = (data.sink = new ClientSocket(ws, data, data.kind === 'hop' ? data.outbox : undefined));
  const session = data.resumeOf;
  if (!state.sessions.has(session)) {
    data.closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session ended; reconnect');
  }
  data.session = session;
  session.attach(sink);
}

/** A new session, counted among its token's unconfigured sockets until its config is accepted. */
function started(deps: ServerDeps, state: ServerState, ws: Ws, data: NewSocket): void {
  data.sink = new ClientSocket(ws, data);
  const session = (data.session = new Session(sessionDeps(deps, data.info.environment), data.info, data.sink));
  session.on((e) => e.type === 'configured' && countedOut(state, data));
  track(deps, state, session);
}

/** A session taken over from another replica's record: it keeps its ledger session and its slot. */
function restored(deps: ServerDeps, state: ServerState, ws: Ws, data: RestoreSocket): Session {
  const { record, from } = data.restore;
  data.sink = new ClientSocket(ws, data);
  const session = (data.session = new Session(
    sessionDeps(deps, data.info.environment),
    data.info,
    data.sink,
    restoreOf(record, from),
  ));
  void deps.limiter.adopt(record.tenant, record.sessionKey);
  countTakeover({ ...deps.cluster, logger: deps.logger }, record, from);
  track(deps, state, session);
  // Claimed before the drain began: it moves on at once, after the audio its client sends on opening.
  if (state.draining) void handOverFromDrain(deps, session);
  return session;
}

/** The one change of kind: a waiting socket whose session was handed over becomes a restore. The same
 * object, since uWS and the socket's inflow hold it. */
function restoreWaiting(data: AwaitingSocket, restore: RestoreSocket['restore']): RestoreSocket {
  delete data.held;
  // The ledger session is the record's, as for a restore accepted at once: this socket's own id would
  // put the rest of the session's usage and its end under a session the ledger never started.
  data.info = { ...data.info, sessionKey: restore.record.sessionKey };
  const base: Omit<AwaitingSocket, 'kind'> = data;
  return Object.assign(base, { kind: 'restore' as const, restore });
}

/** A resume accepted while the session's owner hands it over: once the record is handed over, the
 * session is restored here and gets the frames its client sent meanwhile; else the client is asked to
 * reconnect (its next attempt finds where the session went). */
async function awaitRestore(deps: ServerDeps, state: ServerState, ws: Ws, data: AwaitingSocket): Promise<void> {
  const cluster = { ...deps.cluster, logger: deps.logger };
  state.awaiting.add(data); // a drain waits for it
  const found = await awaitHandover(cluster, data.info.resumeKey!, deps.settings.endTimeoutMs, () => !data.closed)
    .catch(
      (err: Error) => (
        deps.logger.warn({ event: 'resume_lookup_failed', err: err.message }, 'session record lookup failed'),
        undefined
      ),
    )
    .finally(() => state.awaiting.delete(data));
  if (data.closed) return; // a claimed record stays this replica's: the client's next resume takes it over here
  const held = data.held!;
  data.held = undefined; // the client's frames from here: to the restored session, or nowhere
  if (found?.route !== 'restore') {
    data.closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session is moving between gateway replicas; reconnect');
  }
  guarded(deps.logger, 'open', () => {
    const session = restored(deps, state, ws, restoreWaiting(data, { record: found.record, from: found.from }));
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
  held: NonNullable<AwaitingSocket['held']>,
  message: ArrayBuffer,
  binary: boolean,
): void {
  held.bytes += message.byteLength;
  if (held.bytes > deps.settings.maxBufferedAudioBytes) {
    ws.getUserData().closed = true;
    return ws.end(CLOSE.serviceRestart, 'the session is moving between gateway replicas; reconnect');
  }
  held.frames.push({ data: message.slice(0), binary });
}

/** The server's sets know the session until it finishes; another replica knows a resumable one by its record. */
function track(deps: ServerDeps, state: ServerState, session: Session): void {
  state.sessions.add(session);
  const key = session.info.resumeKey && recordKeyHash(session.info.resumeKey);
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
  // Read at each frame: a waiting socket becomes a restore (restoreWaiting).
  const deliver = (message: ArrayBuffer, isBinary: boolean) => {
    if (data.kind === 'relay') return data.hop.fromClient(message, isBinary);
    if (data.kind === 'awaiting') return data.held && hold(deps, ws, data.held, message, isBinary);
    const session = data.session;
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
      ws.end(
        CLOSE.flooded,
        `client sends faster than the gateway reads (over ${MAX_QUEUED_BYTES} bytes or ${MAX_QUEUED_FRAMES} frames waiting)`,
      );
    },
  });
}

/** An accepted socket opens: what happens next depends on its kind. */
function opened(deps: ServerDeps, state: ServerState, ws: Ws): void {
  const data = ws.getUserData();
  data.inflow = inflowOf(deps, ws, data);
  if (data.kind === 'new' && data.claim) {
    if (state.draining) dropClaim(deps, state, data.claim);
    else claimTaken(state, data.claim); // the session holds its key from here (track)
  }
  // A resume that was to be taken over here is, and handed on at once (restored): closed now, its
  // client's audio sent with the open would be lost, and a claim made would be left behind.
  if (state.draining && data.kind !== 'restore' && data.kind !== 'awaiting') return sendAway(state, ws, data);
  switch (data.kind) {
    case 'new':
      return started(deps, state, ws, data);
    case 'resume':
    case 'hop':
      return takeOver(ws, data, state);
    case 'restore':
      return void restored(deps, state, ws, data);
    case 'awaiting':
      return void awaitRestore(deps, state, ws, data);
    case 'relay':
      return data.hop.attach(ws);
    default:
      return unknownKind(data);
  }
}

/** The client closed (after the frames that were still waiting in its inflow). */
function clientClosed(data: SocketData, code: number, reason: ArrayBuffer): void {
  switch (data.kind) {
    case 'relay':
      return data.hop.clientClosed(code, reason);
    case 'awaiting':
      return; // no session yet: the wait sees `closed` and stops
    case 'new':
    case 'resume':
    case 'hop':
    case 'restore':
      if (data.sink) data.session?.onClientClosed(data.sink);
      return;
    default:
      return unknownKind(data);
  }
}

/** Every kind is handled: a new one that is not fails to compile here. */
function unknownKind(data: never): never {
  throw new Error(`socket of unknown kind ${(data as SocketData).kind}`);
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
    open: guarded(log, 'open', (ws) => opened(deps, state, ws)),
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
    drain: guarded(log, 'drain', (ws) => {
      const data = ws.getUserData();
      if (data.kind === 'relay') data.hop.clientDrained();
    }),
    close: guarded(log, 'close', (ws, code: number, reason: ArrayBuffer) => {
      const data = ws.getUserData();
      data.closed = true;
      countedOut(state, data);
      // Frames still waiting in the inflow go first (an end, say), then the close.
      const copied = reason.slice(0);
      const closed = () => {
        try {
          clientClosed(data, code, copied);
        } catch (err) {
          failed(log, 'close', ws, err, data); // after the queue, outside uWS's callback: never the process
        }
      };
      if (data.inflow) data.inflow.close(closed);
      else closed();
    }),
  };
}
