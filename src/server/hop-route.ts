// The owner's end of the internal hop: `/internal/hop/<socket path>?session=<record key hash>` on the
// admin port (never the client port), only with CLUSTER_SECRET; the resume key never travels.
// Another replica that authenticated a resuming client carries it here; its signed identity is
// checked (meant for this replica's address, from a live replica, a signature good once), then it
// is a resume takeover like a local one (the same checks against the session held here) and the
// socket behaves as the public one.
import type uWS from 'uWebSockets.js';
import { acceptHop, HopOutbox } from '../cluster/index.js';
import type { Endpoint } from '../protocol/index.js';
import { gatewayError } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import { asyncHttp } from '../http/index.js';
import { guarded, socketBehavior } from './sockets.js';
import type { ServerDeps, ServerState } from './types.js';
import { accepted, refused, resumeRefusal, type Who } from './upgrade.js';

export function addHopRoutes(app: uWS.TemplatedApp, deps: ServerDeps, state: ServerState): void {
  if (!deps.cluster.hop.secret) return; // no route: a 404 like any unknown path
  // The relaying replica's pings confirm what it passed on to the client.
  const ping = guarded(deps.logger, 'ping', (ws, payload: ArrayBuffer) => {
    const data = ws.getUserData();
    if (data.kind === 'hop') data.outbox.confirmed(payload);
  });
  app
    .ws('/internal/hop/audio-bridge/v2/transcribe', {
      ...socketBehavior(deps, state, 'transcribe'),
      upgrade: hopGate(deps, state, 'transcribe'),
      ping,
    })
    .ws('/internal/hop/audio-bridge/v2/interactions/:id/streams', {
      ...socketBehavior(deps, state, 'streams'),
      upgrade: hopGate(deps, state, 'streams'),
      ping,
    });
}

function hopGate(deps: ServerDeps, state: ServerState, endpoint: Endpoint) {
  return (res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t) => {
    // Everything needed from `req` is read now: it is not valid after an await.
    const key = new URLSearchParams(req.getQuery() ?? '').get('session') ?? '';
    const interactionId = endpoint === 'streams' ? req.getParameter(0) : undefined;
    const identityHeader = req.getHeader('x-sgw-identity');
    const hopHeader = req.getHeader('x-sgw-hop');
    const secKey = req.getHeader('sec-websocket-key');
    const secExtensions = req.getHeader('sec-websocket-extensions');
    // Audited as the owner sees it: the peer is the relaying replica (its own audit has the client).
    const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
    let who: Who = { endpoint, address: peer, peer, kind: 'hop' };
    asyncHttp(deps.logger, res, async (aborted) => {
      const identity = await acceptHop(deps.cluster.hop, key, identityHeader, hopHeader);
      if (aborted()) return;
      if ('refused' in identity || identity.endpoint !== endpoint || identity.interactionId !== interactionId) {
        metrics.hops.inc({ result: 'forbidden' });
        deps.logger.warn(
          { event: 'hop_refused', reason: 'refused' in identity ? identity.refused : 'path differs' },
          'internal hop refused',
        );
        return refused(
          deps,
          who,
          res,
          gatewayError(
            'HOP_FORBIDDEN',
            "internal route: a valid signature of the replicas' secret, used once, is required",
          ),
          'hop_forbidden',
        );
      }
      who = { ...who, tenant: identity.tenant, subject: identity.subject, interactionId };
      const held = state.resumable.get(key);
      if (!held && state.claiming.has(key)) {
        return refused(
          deps,
          who,
          res,
          gatewayError(
            'RESUME_KEY_IN_USE',
            'another connection is opening a session with this resume key; reconnect with it to resume that session',
          ),
          'resume_key_in_use',
        );
      }
      // Not the owner the hop was meant for (a new process at its address) or no such session here: the
      // sending replica takes the session over from its record.
      if (!held || identity.owner !== deps.cluster.replicas.id) {
        return refused(
          deps,
          who,
          res,
          gatewayError('HOP_NOT_OWNER', 'this replica does not hold the session; take it over from its record'),
          'hop_not_owner',
        );
      }
      const environment = identity.environment ?? deps.environments.defaultName;
      const refusal = resumeRefusal(held, { ...identity, environment }, endpoint, interactionId);
      if (refusal) return refused(deps, who, res, refusal, 'resume_refused');
      metrics.hops.inc({ result: 'accepted' });
      const up = { res, context, secKey, protocol: '', secExtensions, aborted };
      const data = { kind: 'hop' as const, info: held.info, resumeOf: held, outbox: new HopOutbox(), closed: false };
      accepted(deps, { ...who, resumeKey: held.info.resumeKey }, up, data);
    });
  };
}
