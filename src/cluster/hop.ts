// The internal hop: a resume that lands on replica B for a live session owned by replica A is carried
// to A over one WebSocket, B → A's `/internal/hop/<endpoint path>?session=<record key hash>`, and B
// relays frames both ways unchanged. The resume key itself never travels: A finds the session by the
// hash its record is named by. B has authenticated the client; A trusts the identity B sends only
// with a MAC of the replicas' shared secret (CLUSTER_SECRET) over a fresh timestamp, the hash and
// that identity, which names B and the address B meant (A's own, from A's signed heartbeat), once
// (hop-signatures.ts), and then runs the same resume checks as for a local client. Without the
// secret there is no hop.
import type uWS from 'uWebSockets.js';
// ws only types here: it is loaded at the first hop (replicas sharing Redis), not by every gateway
// (it brings node:http, https, tls and zlib: idle memory).
import type WebSocket from 'ws';
import { CLOSE, type Endpoint } from '../protocol/index.js';
import type { GatewayError } from '../protocol/index.js';
import { SEND_DROPPED } from '../http/index.js';
import type { SessionInfo } from '../session/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import { hopUrl, signHop, verifyHop, type UsedSignatures } from './hop-signatures.js';
import type { Replicas } from './replicas.js';

/** What B verified about the client, as A checks it against the session it holds. */
export interface HopIdentity {
  tenant: string;
  subject?: string;
  endpoint: Endpoint;
  interactionId?: string;
  /** the environment B resolved and verified the token in; absent from an older B (one environment: A's default) */
  environment?: string;
  notices: boolean;
  /** the replica B's record names as the session's owner: any other process at its address refuses */
  owner: string;
  /** the address B opened the hop to (the owner's heartbeat's): A refuses a hop meant for another */
  ownerUrl: string;
  /** the replica that made the hop (B): A takes it only from a live replica */
  from: string;
}

export interface HopDeps {
  /** CLUSTER_SECRET; unset: no hop (a resume for another live replica's session is refused 503) */
  secret?: string;
  /** the signatures this replica (or its REPLICA_ID) accepted: each is good once */
  used: UsedSignatures;
  /** this replica (a hop's sender, or the address a hop must be meant for) and the others' liveness */
  replicas: Replicas;
  logger: Logger;
}

/** What the gate does with the client's upgrade after `hopUpgrade` (the gate performs every upgrade). */
export type HopOutcome =
  /** accept the client's socket; its frames go through the relay */
  | { kind: 'relay'; relay: HopRelay }
  /** the owner's refusal, passed on as it is: the client's own answer */
  | { kind: 'answer'; status: number; body: { error: GatewayError } }
  /** no CLUSTER_SECRET: no hop in this deployment */
  | { kind: 'unavailable' }
  /** the process at the owner's address is not that owner: take the session over */
  | { kind: 'not_owner' }
  /** the client went away meanwhile */
  | { kind: 'aborted' };

/** The client's accepted socket as the relay uses it: uWS's WebSocket, whose user data says whether it closed. */
export type HopClient = uWS.WebSocket<{ closed: boolean }>;

const HOP_OPEN_TIMEOUT_MS = 5000;
/** Bounds, as for a client on its own replica: a frame, and output waiting for the client socket to open. */
const MAX_HOP_FRAME_BYTES = 16 * 1024 * 1024;
const MAX_PENDING_BYTES = 1024 * 1024;
/** Past this much unread by the client, B stops reading from A, so A's session sees the backlog itself. */
const PAUSE_BACKLOG_BYTES = 64 * 1024;
/** Client audio B could not pass to A yet; past it the client is sent to reconnect. */
const MAX_HOP_BACKLOG_BYTES = 16 * 1024 * 1024;
const HOP_PING_MS = 10_000;
/** B's last signing time: two hops it signs in one millisecond still get different signatures. */
let lastSignedAt = 0;
/** B confirms to A how many of A's messages it has passed to the client this often (and with each ping). */
const CONFIRM_EVERY = 16;
/** A keeps at most this much output B has not confirmed (above the client backlog bound, 1 MiB). */
const MAX_UNCONFIRMED_BYTES = 2 * 1024 * 1024;
const RECONNECT = CLOSE.serviceRestart;

/** A's check of a hop: verifyHop, meant for this replica's address by a live replica, and a
 *  signature not used before (a replay is refused as a bad one). */
export async function acceptHop(
  deps: HopDeps,
  session: string,
  identityHeader: string,
  hopHeader: string,
): Promise<HopIdentity | { refused: string }> {
  const verdict = verifyHop(deps.secret!, session, identityHeader, hopHeader);
  if ('refused' in verdict) return verdict;
  if (verdict.ownerUrl !== deps.replicas.url) return { refused: 'meant for another address' };
  if (verdict.from === deps.replicas.id || !(await deps.replicas.alive(verdict.from).catch(() => false)))
    return { refused: 'not from a live replica' };
  return (await deps.used.firstUse(hopHeader.slice(hopHeader.indexOf('.') + 1)))
    ? verdict
    : { refused: 'signature already used' };
}

/** B's delivery confirmations ride in its pings to A (a client's own frames cannot forge a ping on
 * the hop: B answers the client's pings itself): `d<count>` so far, `e<count>` last, just before B
 * closes the hop (the client left, or B gave it up): nothing after it reached the client. */
const confirmation = (last: boolean, count: number) => `${last ? 'e' : 'd'}${count}`;

/**
 * A's side of the confirmations: the messages sent into the hop that B has not confirmed passing to
 * the client. When the client leaves through the hop, B's last count says which of them were still
 * in flight (between A and B, or held by B): those are what the client missed, kept for its next
 * socket like everything after. Without B's last count (B died) nothing is known and nothing is kept,
 * as for output in flight to a client socket that drops.
 */
export class HopOutbox {
  private unconfirmed: Array<string | Buffer> = [];
  private bytes = 0;
  /** the count of messages sent before unconfirmed[0] */
  private first = 0;
  /** B's last count, when it came */
  private last?: number;
  /** called once B has confirmed everything sent so far */
  private waiters: Array<() => void> = [];

  sent(message: string | Buffer): void {
    this.unconfirmed.push(message);
    this.bytes += message.length;
    if (this.bytes > MAX_UNCONFIRMED_BYTES) this.drop(this.first + 1);
  }

  /** A ping from B (hop-route.ts); other payloads are ignored. */
  confirmed(payload: ArrayBuffer): void {
    const m = /^([de])(\d{1,15})$/.exec(Buffer.from(payload).toString('latin1'));
    if (!m) return;
    if (m[1] === 'e') this.last = Number(m[2]);
    this.drop(Number(m[2]));
  }

  /** `done` once B has confirmed every message sent so far (at once if it has). */
  whenConfirmed(done: () => void): void {
    if (this.unconfirmed.length === 0) return queueMicrotask(done);
    this.waiters.push(done);
  }

  /** What B did not pass to the client, once it said so last. */
  undelivered(): Array<string | Buffer> {
    return this.last === undefined ? [] : this.unconfirmed.splice(0);
  }

  private drop(upTo: number): void {
    while (this.first < upTo && this.unconfirmed.length > 0) {
      this.bytes -= this.unconfirmed.shift()!.length;
      this.first++;
    }
    if (this.unconfirmed.length === 0) for (const done of this.waiters.splice(0)) done();
  }
}

/** How the hop's handshake went: open, refused by the owner (status and body), or failed. */
type Opened = { open: true } | { status: number; body: string } | { failed: string };

async function hopSocket(key: string, identity: HopIdentity, secret: string): Promise<WebSocket> {
  const { default: WebSocket } = await import('ws');
  const url = hopUrl(identity.ownerUrl, key, identity);
  lastSignedAt = Math.max(Date.now(), lastSignedAt + 1);
  return new WebSocket(url, {
    headers: signHop(secret, url.searchParams.get('session')!, identity, lastSignedAt),
    perMessageDeflate: false,
    handshakeTimeout: HOP_OPEN_TIMEOUT_MS,
    maxPayload: MAX_HOP_FRAME_BYTES,
  });
}

function handshake(ws: WebSocket): Promise<Opened> {
  return new Promise((resolve) => {
    ws.once('open', () => resolve({ open: true }));
    ws.once('error', (err) => resolve({ failed: err.message }));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        if (body.length < 4096) body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 502, body }));
      res.on('error', () => resolve({ failed: 'refusal body cut' }));
      setTimeout(() => req.destroy(), HOP_OPEN_TIMEOUT_MS).unref();
    });
  });
}

/**
 * B side of a resume for a live session that replica `owner` holds (called by the upgrade gate after
 * auth and the record's identity check). Opens the hop to the owner and says what the gate does
 * with the client: accept it and relay both ways until either side closes; pass on the owner's 403
 * RESUME_FORBIDDEN (or 409 RESUME_KEY_IN_USE: it is opening a new session with the key right now);
 * on its 409 HOP_NOT_OWNER (the process there is not that owner, or holds no such session: e.g. a
 * new process at a dead replica's address) take the session over. On any other failure the relay
 * closes the accepted client with 1012 so it reconnects (by then the record says whether to take
 * over). Without CLUSTER_SECRET: no hop. `info` is the client's (its resumeKey set); it takes no
 * tenant slot.
 */
export async function hopUpgrade(
  aborted: () => boolean,
  owner: { id: string; url: string },
  info: SessionInfo,
  deps: HopDeps,
): Promise<HopOutcome> {
  if (!deps.secret) {
    metrics.hops.inc({ result: 'unavailable' });
    return { kind: 'unavailable' };
  }
  const identity: HopIdentity = {
    tenant: info.tenant,
    subject: info.subject,
    endpoint: info.endpoint,
    interactionId: info.interactionId,
    environment: info.environment,
    notices: info.notices ?? false,
    owner: owner.id,
    ownerUrl: owner.url,
    from: deps.replicas.id,
  };
  const started = performance.now();
  const log = deps.logger.child({ owner: owner.id, sessionKey: info.sessionKey });
  // The relay listens from the start: the owner's first frames can come with its handshake answer.
  const hop = await hopSocket(info.resumeKey!, identity, deps.secret);
  const relay = new HopRelay(hop, log);
  const opened = await handshake(hop);
  if (aborted()) return (relay.abandon(), { kind: 'aborted' });
  const refusal = 'status' in opened ? ownerRefusal(opened.body) : undefined;
  if (refusal) {
    metrics.hops.inc({ result: refusal.error.id === 'HOP_NOT_OWNER' ? 'not_owner' : 'refused' });
    relay.abandon();
    if (refusal.error.id === 'HOP_NOT_OWNER') return { kind: 'not_owner' };
    return { kind: 'answer', status: refusal.error.status, body: refusal };
  }
  const failure = 'open' in opened ? undefined : 'failed' in opened ? opened.failed : `HTTP ${opened.status}`;
  metrics.hops.inc({ result: failure ? 'failed' : 'opened' });
  if (failure)
    log.warn(
      { event: 'hop_failed', cause: failure },
      "the hop to the session's replica failed; the client is asked to reconnect",
    );
  else
    log.info(
      { event: 'hop_opened', openMs: Math.round(performance.now() - started) },
      "resume carried to the session's replica",
    );
  return { kind: 'relay', relay };
}

/** The owner's 403 RESUME_FORBIDDEN or 409 RESUME_KEY_IN_USE body (passed on as it is: the
 * client's own answer), or its 409 HOP_NOT_OWNER. */
function ownerRefusal(body: string): { error: GatewayError } | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: GatewayError };
    const id = parsed.error?.id;
    return id === 'RESUME_FORBIDDEN' || id === 'RESUME_KEY_IN_USE' || id === 'HOP_NOT_OWNER'
      ? { error: parsed.error! }
      : undefined;
  } catch {
    return undefined;
  }
}

const sendable = (code: number, fallback: number) =>
  (code >= 3000 && code <= 4999) ||
  [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014].includes(code)
    ? code
    : fallback;
const NO_ANSWER = "the session's replica did not answer; reconnect with your resume key";

/** B's relay between one client socket (uWS) and its hop to the owner (ws); frames pass unchanged.
 * Until the client's socket opens, the owner's frames and its close wait here (bounded). */
export class HopRelay {
  private client?: HopClient;
  private pending: Array<{ data: Buffer; binary: boolean }> = [];
  private pendingBytes = 0;
  private wasOpen = false;
  /** set once: how the client is to be closed (held until its socket opens) */
  private ending?: { code: number; reason: string };
  private awaitingPong = false;
  /** the owner's messages passed to the client (confirmed to the owner in pings) */
  private delivered = 0;
  private readonly pinger: NodeJS.Timeout;

  constructor(
    private readonly hop: WebSocket,
    private readonly log: Logger,
  ) {
    metrics.hopSessions.inc();
    this.pinger = setInterval(() => this.ping(), HOP_PING_MS);
    this.pinger.unref();
    hop.on('open', () => (this.wasOpen = true));
    hop.on('message', (data: Buffer, binary: boolean) => this.fromOwner(data, binary));
    hop.on('close', (code: number, reason: Buffer) => {
      if (!this.wasOpen) return this.end(RECONNECT, NO_ANSWER);
      this.end(
        sendable(code, RECONNECT),
        code === 1006 ? "the session's replica went away; reconnect with your resume key" : reason.toString(),
      );
    });
    hop.on('error', (err) => log.warn({ event: 'hop_error', err: err.message }, 'hop socket error'));
    hop.on('pong', () => (this.awaitingPong = false));
    // The owner asks what its client has had (its session is ending): the count goes back at once.
    hop.on('ping', () => this.confirm(false));
  }

  /** The client's socket opened (sockets.ts): what the owner already sent goes first, then its close if it came. */
  attach(ws: HopClient): void {
    this.client = ws;
    for (const m of this.pending.splice(0)) this.toClient(m.data, m.binary);
    this.pendingBytes = 0;
    if (this.ending) this.closeClient(this.ending.code, this.ending.reason);
    else if (!this.wasOpen) this.end(RECONNECT, NO_ANSWER);
  }

  /** The client will not come (its upgrade was refused or it went away first). */
  abandon(): void {
    this.end(1000, 'client went away');
  }

  /** A client frame (sockets.ts): copied, since uWS reuses its memory after the callback. */
  fromClient(message: ArrayBuffer, binary: boolean): void {
    if (this.ending) return;
    if (this.hop.bufferedAmount > MAX_HOP_BACKLOG_BYTES)
      return this.end(RECONNECT, "the hop to the session's replica is backed up; reconnect with your resume key");
    this.hop.send(Buffer.from(new Uint8Array(message)), { binary });
  }

  /** The client's socket closed (sockets.ts): the owner's session sees its client go. */
  clientClosed(code: number, reason: ArrayBuffer): void {
    const client = this.client?.getUserData();
    if (client) client.closed = true;
    this.end(sendable(code, 1000), Buffer.from(reason).toString());
  }

  /** The client reads again (uWS drain): B reads from the owner again. */
  clientDrained(): void {
    if (!this.ending && this.hop.isPaused && this.client!.getBufferedAmount() < PAUSE_BACKLOG_BYTES) this.hop.resume();
  }

  private fromOwner(data: Buffer, binary: boolean): void {
    if (this.client) return this.toClient(data, binary);
    this.pendingBytes += data.length;
    if (this.pendingBytes > MAX_PENDING_BYTES)
      return this.end(RECONNECT, 'the client socket did not open; reconnect with your resume key');
    this.pending.push({ data, binary });
  }

  private toClient(data: Buffer, binary: boolean): void {
    const ws = this.client!;
    if (ws.getUserData().closed) return;
    let result = 0;
    ws.cork(() => (result = ws.send(data, binary)));
    if (result === SEND_DROPPED) return this.end(CLOSE.clientTooSlow, 'client too slow: output is not being read');
    if (++this.delivered % CONFIRM_EVERY === 0) this.confirm(false);
    if (ws.getBufferedAmount() > PAUSE_BACKLOG_BYTES) this.hop.pause();
  }

  private ping(): void {
    if (this.ending || this.hop.readyState !== this.hop.OPEN) return;
    // Paused for a client that does not read, B reads no pong either: the owner's own rules judge that client.
    if (this.hop.isPaused) return void (this.awaitingPong = false);
    if (this.awaitingPong) return this.hop.terminate(); // its close sends the client to reconnect
    this.awaitingPong = true;
    this.confirm(false);
  }

  private confirm(last: boolean): void {
    if (this.hop.readyState === this.hop.OPEN) this.hop.ping(confirmation(last, this.delivered));
  }

  /** Ends both sides once: the hop (with the same code where ws can send it) and the client, now or when it opens. */
  private end(code: number, reason: string): void {
    if (this.ending) return;
    const short = Buffer.from(reason).subarray(0, 120).toString();
    this.ending = { code, reason: short };
    clearInterval(this.pinger);
    metrics.hopSessions.dec();
    if (this.hop.readyState === this.hop.OPEN) {
      this.confirm(true); // before the close: A reads them in this order
      this.hop.close(code === RECONNECT || code >= 3000 ? 1000 : code, short);
    } else if (this.hop.readyState === this.hop.CONNECTING) this.hop.terminate();
    this.closeClient(code, short);
  }

  private closeClient(code: number, reason: string): void {
    const data = this.client?.getUserData();
    if (!data || data.closed) return;
    data.closed = true;
    this.client!.cork(() => this.client!.end(code, reason));
  }
}
