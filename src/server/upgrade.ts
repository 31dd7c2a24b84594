// The WebSocket upgrade is the gate: route → auth → tenant limit. Every refusal is an HTTP status
// with a short JSON body, before any socket is accepted. During the drain a request that passes
// auth is still accepted (sockets.ts closes it with 1012): the vendor SDK stops retrying for good
// after one failed handshake, so a refusal here would lose the client instead of moving it.
import { randomUUID } from 'node:crypto';
import type uWS from 'uWebSockets.js';
import type { AuthDecision, UpgradeRequest } from '../auth/index.js';
import type { Endpoint } from '../protocol/index.js';
import { gatewayError } from '../protocol/errors.js';
import { metrics } from '../telemetry/index.js';
import { asyncHttp, refuse } from './http.js';
import type { ServerDeps, ServerState, SocketData } from './types.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type UpgradeHandler = (res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t) => void;

export function upgradeGate(deps: ServerDeps, state: ServerState, endpoint: Endpoint): UpgradeHandler {
  return (res, req, context) => {
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

    asyncHttp(deps.logger, res, async (aborted) => {
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
      const holdsSlot = !state.draining;
      if (holdsSlot && !(await deps.limiter.acquire(decision.tenant, sessionKey))) {
        if (!aborted()) {
          refuse(res, gatewayError('TENANT_SESSION_LIMIT', `tenant "${decision.tenant}" already has ${deps.maxSessionsPerTenant} concurrent sessions`), 'tenant_limit');
        }
        return;
      }
      if (aborted()) return void (holdsSlot && deps.limiter.release(decision.tenant, sessionKey));
      const data: SocketData = {
        info: { sessionKey, endpoint, tenant: decision.tenant, interactionId, environment: query.get('environment') ?? undefined, clientToken: decision.clientToken },
        holdsSlot,
        closed: false,
      };
      // Not inside res.cork: in this uWS build, cork() after an asynchronous upgrade can misread the
      // new WebSocket's memory as HTTP state and drop the socket (the client sees 1006 right after
      // its open; seen here in about 1 of 100 upgrades that resolve in the same tick).
      res.upgrade(data, secKey, decision.protocol ?? (secProtocol ? secProtocol.split(',')[0].trim() : ''), secExtensions, context);
    });
  };
}
