// The HTTP routes, one set per port. The client port (PORT) is what browsers and the load balancer
// reach: health, readiness (503 from the drain's first moment) and the browser demo when asked for.
// The admin port (ADMIN_PORT) is for the cluster's inside: metrics, the ops usage API and (added by
// hop-route.ts) the internal hop; kept off the client port so a public Service never exposes them.
// Anything else on either port is a JSON 404.
import type uWS from 'uWebSockets.js';
import { addDemoRoutes } from '../demo/index.js';
import { echo } from '../protocol/index.js';
import { gatewayError } from '../protocol/index.js';
import { metrics, registry } from '../telemetry/index.js';
import { asyncHttp, sendJson } from '../http/index.js';
import type { ServerDeps, ServerState } from './types.js';

export function addClientRoutes(app: uWS.TemplatedApp, deps: ServerDeps, state: ServerState): uWS.TemplatedApp {
  if (deps.demo) addDemoRoutes(app, deps.demo, deps.logger);
  app
    .get('/healthz', (res) => sendJson(res, 200, { status: 'ok' }))
    .get('/readyz', (res) =>
      sendJson(res, state.draining ? 503 : 200, {
        status: state.draining ? 'draining' : 'ready',
        sessions: state.sessions.size,
      }),
    );
  return addNotFound(app);
}

export function addAdminRoutes(app: uWS.TemplatedApp, deps: ServerDeps): uWS.TemplatedApp {
  const log = deps.logger;
  app
    .get('/metrics', (res) =>
      asyncHttp(log, res, async (aborted) => {
        const text = await registry.metrics();
        if (!aborted()) res.cork(() => res.writeHeader('content-type', registry.contentType).end(text));
      }),
    )
    .any('/v1/*', (res, req) => {
      const method = req.getMethod().toUpperCase();
      const path = req.getUrl();
      const query = new URLSearchParams(req.getQuery() ?? '');
      const authorization = req.getHeader('authorization') || undefined;
      // Read now: `req` is gone after the first await. The address is for the API's audit events: the
      // socket's peer, never X-Forwarded-For (no proxy fronts the admin port, so the header is the caller's).
      const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
      asyncHttp(log, res, async (aborted) => {
        const answer = await deps.usageApi.handle({ method, path, query, authorization, address: peer, peer });
        if (aborted()) return;
        if (!answer) return sendJson(res, 404, notFound(method, path));
        sendJson(res, answer.status, answer.body);
      });
    });
  return addNotFound(app);
}

function addNotFound(app: uWS.TemplatedApp): uWS.TemplatedApp {
  return app.any('/*', (res, req) => {
    metrics.refusals.inc({ reason: 'not_found' });
    sendJson(res, 404, notFound(req.getMethod().toUpperCase(), req.getUrl()));
  });
}

function notFound(method: string, path: string) {
  return { type: 'error', error: gatewayError('NOT_FOUND', `no route for ${echo(method)} ${echo(path)}`) };
}
