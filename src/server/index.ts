// The uWebSockets.js app: a declarative list of routes. The WebSocket upgrade is the gate
// (route → auth → tenant limit) and every refusal is an HTTP status with a short JSON body,
// before any socket is accepted; accepted sockets are handed to a Session.
import { randomUUID } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { Authenticator, AuthDecision, UpgradeRequest } from '../auth/index.js';
import { echo, type Endpoint } from '../protocol/index.js';
import { gatewayError, type GatewayError } from '../protocol/errors.js';
import { CLOSE, Session, type SessionDeps, type SessionInfo } from '../session/index.js';
import { metrics, registry, type Logger } from '../telemetry/index.js';
import type { UsageApi } from '../usage/index.js';

export interface ServerDeps extends SessionDeps {
  host: string;
  port: number;
  auth: Authenticator;
  usageApi: UsageApi;
  maxSessionsPerTenant: number;
  logger: Logger;
}

export interface GatewayServer {
  readonly port: number;
  readonly sessions: ReadonlySet<Session>;
  /** Stop taking sessions, end the running ones gracefully, wait up to `seconds`, then stop listening. */
  drain(seconds: number): Promise<void>;
  close(): void;
}

interface SocketData {
  info: SessionInfo;
  session?: Session;
  closed: boolean;
}

type Ws = uWS.WebSocket<SocketData>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STATUS_TEXT: Record<number, string> = { 200: 'OK', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable' };
/** Client frames larger than 64000 bytes are split, not refused (a whole WAV file in one frame is
 * common). This bounds one frame's memory (uWS closes a socket that sends more with 1009); it is
 * above the audio and text bounds so that an oversized config or audio frame gets a specific answer. */
const MAX_CLIENT_FRAME_BYTES = 16 * 1024 * 1024;
/** Output waiting for a client that does not read; past it the client is closed as too slow. */
const MAX_CLIENT_BACKLOG_BYTES = 1024 * 1024;
/** uWS's ws.send result when the message was dropped (over maxBackpressure). */
const SEND_DROPPED = 2;

/** uWS's npm build silently falls back to a slow pure-JS server when its binary does not load. */
export function isNativeUws(): boolean {
  return /\[native code\]/.test(Function.prototype.toString.call(uWS.App));
}

export function startServer(deps: ServerDeps): Promise<GatewayServer> {
  const sessions = new Set<Session>();
  let draining = false;
  let listenSocket: uWS.us_listen_socket | null = null;
  const log = deps.logger;

  const sendJson = (res: uWS.HttpResponse, status: number, body: unknown, extraHeaders: Record<string, string> = {}) => {
    res.cork(() => {
      res.writeStatus(`${status} ${STATUS_TEXT[status] ?? ''}`.trim());
      res.writeHeader('content-type', 'application/json');
      for (const [k, v] of Object.entries(extraHeaders)) res.writeHeader(k, v);
      res.end(JSON.stringify(body));
    });
  };
  const refuse = (res: uWS.HttpResponse, err: GatewayError, reason: string) => {
    metrics.refusals.inc({ reason });
    sendJson(res, err.status, { error: err });
  };

  /** Runs an async handler with uWS's abort rule: never touch `res` after the client went away. */
  const asyncHttp = (res: uWS.HttpResponse, work: (aborted: () => boolean) => Promise<void>) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    work(() => aborted).catch((err: Error) => {
      log.error({ err: err.message }, 'request failed');
      if (!aborted) sendJson(res, 500, { error: gatewayError('INTERNAL', 'internal error') });
    });
  };

  const upgrade = (endpoint: Endpoint) => (res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t) => {
    // Everything needed from `req` is read now: it is not valid after an await.
    const interactionId = endpoint === 'streams' ? req.getParameter(0) : undefined;
    const query = new URLSearchParams(req.getQuery() ?? '');
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = v;
    });
    const secKey = req.getHeader('sec-websocket-key');
    const secExtensions = req.getHeader('sec-websocket-extensions');
    const secProtocol = req.getHeader('sec-websocket-protocol');

    asyncHttp(res, async (aborted) => {
      if (draining) return refuse(res, gatewayError('GATEWAY_SHUTTING_DOWN', 'the gateway is draining; connect again'), 'draining');
      if (endpoint === 'streams' && !UUID.test(interactionId ?? '')) {
        return refuse(res, gatewayError('INVALID_INTERACTION_ID', 'the interaction id in the path must be a UUID'), 'bad_interaction_id');
      }
      const request: UpgradeRequest = { endpoint, query, headers };
      const decision: AuthDecision = await deps.auth.authenticate(request);
      if (aborted()) return;
      if (!decision.ok) {
        if (decision.reason === 'full_access_from_browser') metrics.fullAccessTokenAttempts.inc();
        return refuse(res, decision.error, decision.reason);
      }
      const sessionKey = randomUUID();
      if (!(await deps.limiter.acquire(decision.tenant, sessionKey))) {
        if (!aborted()) {
          refuse(res, gatewayError('TENANT_SESSION_LIMIT', `tenant "${decision.tenant}" already has ${deps.maxSessionsPerTenant} concurrent sessions`), 'tenant_limit');
        }
        return;
      }
      if (aborted()) return void deps.limiter.release(decision.tenant, sessionKey);
      const data: SocketData = {
        info: { sessionKey, endpoint, tenant: decision.tenant, interactionId, environment: query.get('environment') ?? undefined, clientToken: decision.clientToken },
        closed: false,
      };
      // Not inside res.cork: in this uWS build, cork() after an asynchronous upgrade can misread the
      // new WebSocket's memory as HTTP state and drop the socket (the client sees 1006 right after
      // its open; seen here in about 1 of 100 upgrades that resolve in the same tick).
      res.upgrade(data, secKey, decision.protocol ?? (secProtocol ? secProtocol.split(',')[0].trim() : ''), secExtensions, context);
    });
  };

  /** A socket callback that throws ends that socket's session, never the process. */
  const guarded = <A extends unknown[]>(where: string, fn: (ws: Ws, ...a: A) => void) => (ws: Ws, ...a: A) => {
    try {
      fn(ws, ...a);
    } catch (err) {
      log.error({ event: 'socket_callback_failed', where, err }, 'socket callback threw; closing that socket');
      metrics.internalErrors.inc({ where: 'socket' });
      const data = ws.getUserData();
      if (data.closed) return;
      data.closed = true;
      ws.end(CLOSE.internal, 'internal error');
    }
  };

  const clientSink = (ws: Ws, data: SocketData) => ({
    sendText(text: string | Buffer): boolean {
      if (data.closed) return false;
      let result = 0;
      ws.cork(() => {
        result = ws.send(text, false);
      });
      return result !== SEND_DROPPED && ws.getBufferedAmount() <= MAX_CLIENT_BACKLOG_BYTES;
    },
    backlog: () => (data.closed ? 0 : ws.getBufferedAmount()),
    close(code: number, reason: string) {
      if (data.closed) return;
      data.closed = true;
      ws.cork(() => ws.end(code, reason));
    },
  });

  const socketBehavior = (endpoint: Endpoint): uWS.WebSocketBehavior<SocketData> => ({
    compression: uWS.DISABLED,
    maxPayloadLength: MAX_CLIENT_FRAME_BYTES,
    maxBackpressure: 2 * MAX_CLIENT_BACKLOG_BYTES,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade: upgrade(endpoint),
    open: guarded('open', (ws) => {
      const data = ws.getUserData();
      const session = new Session(deps, data.info, clientSink(ws, data));
      data.session = session;
      sessions.add(session);
      session.onFinished = (s) => sessions.delete(s);
    }),
    message: guarded('message', (ws, message: ArrayBuffer, isBinary: boolean) => {
      const session = ws.getUserData().session;
      if (!session) return;
      // uWS reuses `message` after this callback: the session copies what it keeps.
      if (isBinary) session.onClientBinary(message);
      else session.onClientText(message);
    }),
    close: guarded('close', (ws) => {
      const data = ws.getUserData();
      data.closed = true;
      data.session?.onClientClosed();
    }),
  });

  const app = uWS.App()
    .ws('/audio-bridge/v2/transcribe', socketBehavior('transcribe'))
    .ws('/audio-bridge/v2/interactions/:id/streams', socketBehavior('streams'))
    .get('/healthz', (res) => sendJson(res, 200, { status: 'ok' }))
    .get('/readyz', (res) => sendJson(res, draining ? 503 : 200, { status: draining ? 'draining' : 'ready', sessions: sessions.size }))
    .get('/metrics', (res) =>
      asyncHttp(res, async (aborted) => {
        const text = await registry.metrics();
        if (!aborted()) res.cork(() => res.writeHeader('content-type', registry.contentType).end(text));
      }),
    )
    .any('/v1/*', (res, req) => {
      const method = req.getMethod().toUpperCase();
      const path = req.getUrl();
      const query = new URLSearchParams(req.getQuery() ?? '');
      const authorization = req.getHeader('authorization') || undefined;
      asyncHttp(res, async (aborted) => {
        const answer = await deps.usageApi.handle({ method, path, query, authorization });
        if (aborted()) return;
        if (!answer) return sendJson(res, 404, { error: gatewayError('NOT_FOUND', `no route for ${echo(method)} ${echo(path)}`) });
        sendJson(res, answer.status, answer.body);
      });
    })
    .any('/*', (res, req) => {
      metrics.refusals.inc({ reason: 'not_found' });
      sendJson(res, 404, { error: gatewayError('NOT_FOUND', `no route for ${echo(req.getMethod().toUpperCase())} ${echo(req.getUrl())}`) });
    });

  return new Promise((resolve, reject) => {
    app.listen(deps.host, deps.port, (socket) => {
      if (!socket) return reject(new Error(`could not listen on ${deps.host}:${deps.port}`));
      listenSocket = socket;
      const server: GatewayServer = {
        port: uWS.us_socket_local_port(socket),
        sessions,
        async drain(seconds) {
          draining = true;
          for (const s of [...sessions]) s.shutdown();
          const deadline = Date.now() + seconds * 1000;
          while (sessions.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          // Time is up: what is still open finishes now, usage as it stands, so no session stays open in the ledger.
          for (const s of [...sessions]) s.abort();
          server.close();
        },
        close() {
          if (listenSocket) uWS.us_listen_socket_close(listenSocket);
          listenSocket = null;
        },
      };
      resolve(server);
    });
  });
}
