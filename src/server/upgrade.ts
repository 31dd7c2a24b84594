// The WebSocket upgrade is the gate: route → auth → limits. Every refusal is an HTTP status
// with a short JSON body, before any socket is accepted. A new socket takes no tenant slot (its
// session takes one when its config arrives); it counts among its token's unconfigured sockets
// (unconfigured.ts).
// During the drain a request that passes auth is still accepted (sockets.ts closes it with 1012):
// the vendor SDK stops retrying for good after one failed handshake, so a refusal here would lose
// the client instead of moving it.
import { randomUUID } from 'node:crypto';
import type uWS from 'uWebSockets.js';
import { sessionWho, type AuditedInfo, type AuditInput, type Origin } from '../audit/index.js';
import { isResumeKey, type AuthDecision, type UpgradeRequest } from '../auth/index.js';
import { findResume, hopUpgrade, recordKeyHash } from '../cluster/index.js';
import type { Endpoint } from '../protocol/index.js';
import { gatewayError, type GatewayError } from '../protocol/index.js';
import type { Session, SessionInfo } from '../session/index.js';
import { metrics } from '../telemetry/index.js';
import { asyncHttp, refuse, sendJson } from '../http/index.js';
import { accept, type ClientUpgrade } from './accept.js';
import { resolveEnvironment } from './environments.js';
import { claimResumeKey, dropClaim } from './resume-claim.js';
import { UnconfiguredSockets, type UnconfiguredKey } from './unconfigured.js';
import type { ServerDeps, ServerState, SocketData } from './types.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type UpgradeHandler = (res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t) => void;
/** Who asks, as far as the gate knows yet (the token's tenant and subject once it verified). */
export type Who = Omit<AuditInput, 'event' | 'outcome'>;

/** A refusal, audited with who asked before it is answered (also the hop's, hop-route.ts). */
export function refused(deps: ServerDeps, who: Who, res: uWS.HttpResponse, error: GatewayError, reason: string): void {
  deps.audit.record({ ...who, event: 'upgrade_refused', outcome: 'refused', reason, error: error.id });
  refuse(res, error, reason);
}

/** An accepted socket, audited with who connects (a resume's session keeps its first address: this is the new one). */
export function accepted(deps: ServerDeps, who: Who, up: ClientUpgrade, data: SocketData): void {
  const { sessionKey, environment } = data.info;
  deps.audit.record({
    ...who,
    event: 'upgrade_accepted',
    outcome: 'ok',
    kind: data.kind,
    sessionId: sessionKey,
    environment,
  });
  accept(up, data);
}

/** Only the session's own client may take it over: same tenant, subject, environment and endpoint (and interaction);
 * an expired token only for a session that is waiting for it; and only once its config is accepted
 * (before that there is nothing to resume: the key's session is still being opened). */
export function resumeRefusal(
  held: Session | undefined,
  d: { tenant: string; subject?: string; environment: string },
  endpoint: Endpoint,
  interactionId?: string,
): GatewayError | undefined {
  if (!held)
    return gatewayError(
      'TOKEN_EXPIRED',
      'token has expired and there is no session to resume with it; fetch a new one',
    );
  const same =
    held.info.tenant === d.tenant &&
    held.info.subject !== undefined &&
    held.info.subject === d.subject &&
    held.info.environment === d.environment &&
    held.info.endpoint === endpoint &&
    held.info.interactionId === interactionId;
  if (!same) return gatewayError('RESUME_FORBIDDEN', "this resume key belongs to another client's session");
  if (held.phase === 'awaiting_config' || held.phase === 'connecting') return KEY_IN_USE;
  return undefined;
}

const KEY_IN_USE = gatewayError(
  'RESUME_KEY_IN_USE',
  'another connection is opening a session with this resume key; reconnect with it to resume that session',
);

/** A resume for a session live on replica `owner`: carried there over the internal hop, or taken over here. */
async function carryOver(
  deps: ServerDeps,
  up: ClientUpgrade,
  info: SessionInfo,
  owner: { id: string; url: string },
): Promise<true | { replaceOwner?: string }> {
  const outcome = await hopUpgrade(up.aborted, owner, info, deps.cluster.hop);
  switch (outcome.kind) {
    case 'not_owner':
      return resumeElsewhere(deps, up, info, owner.id);
    case 'unavailable':
      refused(
        deps,
        sessionWho(info),
        up.res,
        gatewayError(
          'RESUME_UNAVAILABLE',
          'the session is live on another gateway replica and this deployment has no internal hop; retry shortly',
        ),
        'resume_unavailable',
      );
      return true;
    case 'answer':
      // The owner's refusal, passed on: audited here, where the client is.
      deps.audit.record({
        ...sessionWho(info),
        event: 'upgrade_refused',
        outcome: 'refused',
        reason: 'hop_answer',
        status: outcome.status,
      });
      sendJson(up.res, outcome.status, outcome.body);
      return true;
    case 'relay':
      accepted(deps, sessionWho(info), up, { kind: 'relay', info, hop: outcome.relay, closed: false });
      return true;
    case 'aborted':
      return true;
  }
}

/** A resume of a key this replica does not hold: a session record says whether it lives on another
 * replica (the hop), was handed over or lost its replica (taken over here), or is unknown (a new
 * session: the gate goes on as for any new socket, and claims the key, replacing `replaceOwner`'s
 * bare claim if so). While this replica drains, a session handed over is still taken over here (and
 * handed on at once, with the audio its client sends as it opens: sockets.ts), but no hop is opened:
 * that client goes on as a new socket would, sent to reconnect elsewhere. */
async function resumeElsewhere(
  deps: ServerDeps,
  up: ClientUpgrade,
  info: SessionInfo,
  notOwner?: string,
  draining = false,
): Promise<true | { replaceOwner?: string }> {
  let found;
  try {
    const legacyEnvironment = deps.environments.defaultName;
    found = await findResume(
      { ...deps.cluster, logger: deps.logger, legacyEnvironment },
      info.resumeKey!,
      info,
      notOwner,
    );
  } catch (err) {
    // Redis away: no replica can take a session over meanwhile; the client gets a new session (not resumed).
    deps.logger.warn({ event: 'resume_lookup_failed', err: (err as Error).message }, 'session record lookup failed');
    return {};
  }
  if (up.aborted()) return true;
  switch (found.route) {
    case 'none':
      return { replaceOwner: found.replaceOwner };
    case 'forbidden':
      refused(
        deps,
        sessionWho(info),
        up.res,
        gatewayError('RESUME_FORBIDDEN', "this resume key belongs to another client's session"),
        'resume_refused',
      );
      return true;
    case 'gone':
      refused(
        deps,
        sessionWho(info),
        up.res,
        gatewayError('RESUME_UNAVAILABLE', 'the session is moving between gateway replicas; retry shortly'),
        'resume_unavailable',
      );
      return true;
    case 'hop':
      if (draining) return {}; // no hop from a process about to go
      // The process at the owner's address is not the owner (or lost the session): taken over here at once.
      return carryOver(deps, up, info, found.owner);
    case 'wait':
      // Accepted now (the vendor SDK gives up on a handshake not done in 4 s); the socket waits for the handover.
      accepted(deps, sessionWho(info), up, { kind: 'awaiting', info, held: { frames: [], bytes: 0 }, closed: false });
      return true;
    case 'restore': {
      const r = found.record;
      accepted(deps, sessionWho(info), up, {
        kind: 'restore',
        info: { ...info, sessionKey: r.sessionKey }, // its environment is info's: findResume checked
        restore: { record: r, from: found.from },
        closed: false,
      });
      return true;
    }
  }
}

/** A new session's socket: refused while the tenant's configured sessions fill its cap (the binding
 * check is at config time), or while its token (or, past the backstop, its subject) has its bound of
 * sockets without a config after a short wait for a place. Else it is counted among those (undefined
 * returned); the caller gives the count back if it does not upgrade. */
async function newSocketRefusal(
  deps: ServerDeps,
  state: ServerState,
  tenant: string,
  unconfigured: UnconfiguredKey,
): Promise<{ error: GatewayError; reason: string } | undefined> {
  if (!state.draining && (await deps.limiter.atCap(tenant))) {
    return {
      error: gatewayError(
        'TENANT_SESSION_LIMIT',
        `tenant "${tenant}" already has ${deps.maxSessionsPerTenant} concurrent sessions`,
      ),
      reason: 'tenant_limit',
    };
  }
  // Counted after the await: the check and the count are one step, however many upgrades are in flight.
  const full = await state.unconfigured.take(unconfigured);
  if (full === undefined) return undefined;
  const details =
    full === 'token'
      ? `this token already has ${deps.maxUnconfiguredPerToken} sockets open that have not sent a config; send their configs or close them`
      : `the tokens of this subject (tokens without one: of this tenant) already have ${deps.maxUnconfiguredPerSubject} sockets open that have not sent a config; send their configs or close them`;
  return { error: gatewayError('UNCONFIGURED_LIMIT', details), reason: 'unconfigured_limit' };
}

/** A path or query the gate refuses before anything else: an interaction id that is no UUID, a resume key
 * that is not one. */
function malformedRequest(
  endpoint: Endpoint,
  interactionId: string | undefined,
  resumeKey: string | undefined,
): { error: GatewayError; reason: string } | undefined {
  if (endpoint === 'streams' && !UUID.test(interactionId ?? '')) {
    const error = gatewayError('INVALID_INTERACTION_ID', 'the interaction id in the path must be a UUID');
    return { error, reason: 'bad_interaction_id' };
  }
  if (resumeKey !== undefined && !isResumeKey(resumeKey)) {
    const error = gatewayError(
      'INVALID_RESUME_KEY',
      'resume must be 22-128 characters of A-Z a-z 0-9 _ - (at least 128 random bits)',
    );
    return { error, reason: 'bad_resume_key' };
  }
  return undefined;
}

/** A new session's identity, from who the token says connects and what the request asked for
 * (`environment`: the resolved one, never the raw query). */
function sessionInfo(
  endpoint: Endpoint,
  decision: Extract<AuthDecision, { ok: true }>,
  query: URLSearchParams,
  interactionId: string | undefined,
  resumeKey: string | undefined,
  environment: string,
  origin: Origin,
): AuditedInfo {
  return {
    sessionKey: randomUUID(),
    endpoint,
    tenant: decision.tenant,
    interactionId,
    environment,
    clientToken: decision.clientToken,
    subject: decision.subject,
    clientId: decision.clientId,
    ...origin,
    resumeKey,
    notices: query.get('notices') === 'true',
  };
}

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
    const origin = deps.audit.origin(Buffer.from(res.getRemoteAddressAsText()).toString(), headers['x-forwarded-for']);

    asyncHttp(deps.logger, res, async (aborted) => {
      const resumeKey = query.get('resume') ?? undefined;
      // The key (audited as its link) and the interaction id only once well-formed: else they may be anything the client sent.
      const linked = isResumeKey(resumeKey ?? '') ? resumeKey : undefined;
      const interaction = UUID.test(interactionId ?? '') ? interactionId : undefined;
      let who: Who = { endpoint, interactionId: interaction, ...origin, resumeKey: linked };
      const malformed = malformedRequest(endpoint, interactionId, resumeKey);
      if (malformed) return refused(deps, who, res, malformed.error, malformed.reason);
      // The environment first: its auth server alone verifies the token (residency fails closed).
      const env = resolveEnvironment(deps.environments, query);
      if ('error' in env) return refused(deps, who, res, env.error, env.reason);
      const environment = env.name;
      who = { ...who, environment };
      const request: UpgradeRequest = { endpoint, query, headers };
      // A resume may present the token its session started with, expired since (browser tokens live 5 min).
      const decision: AuthDecision = await env.served.auth.authenticate(request, {
        allowExpired: resumeKey !== undefined,
      });
      if (aborted()) return;
      if (!decision.ok) {
        if (decision.reason === 'full_access_from_browser') metrics.fullAccessTokenAttempts.inc();
        return refused(deps, who, res, decision.error, decision.reason);
      }
      who = { ...who, tenant: decision.tenant, subject: decision.subject, clientId: decision.clientId };
      const protocol = decision.protocol ?? (secProtocol ? secProtocol.split(',')[0].trim() : '');
      const up: ClientUpgrade = { res, context, secKey, protocol, secExtensions, aborted };
      const held = resumeKey === undefined ? undefined : state.resumable.get(recordKeyHash(resumeKey));
      let fresh: { replaceOwner?: string } = {};
      if (resumeKey !== undefined && !held) {
        const info = sessionInfo(endpoint, decision, query, interactionId, resumeKey, environment, origin);
        const found = await resumeElsewhere(deps, up, info, undefined, state.draining);
        if (found === true) return;
        fresh = found;
      }
      if (held || decision.expired) {
        const refusal = resumeRefusal(held, { ...decision, environment }, endpoint, interactionId);
        if (refusal) return refused(deps, who, res, refusal, 'resume_refused');
        return accepted(deps, who, up, { kind: 'resume', info: held!.info, resumeOf: held!, closed: false });
      }
      const unconfigured = UnconfiguredSockets.keyOf(decision.tenant, decision.subject, decision.clientToken);
      const refusal = await newSocketRefusal(deps, state, decision.tenant, unconfigured);
      if (aborted()) return void (!refusal && state.unconfigured.release(unconfigured));
      if (refusal) return refused(deps, who, res, refusal.error, refusal.reason);
      const info = sessionInfo(endpoint, decision, query, interactionId, resumeKey, environment, origin);
      let claim: string | undefined;
      if (resumeKey !== undefined && !state.draining) {
        // Claimed last, right before the socket is accepted: a refusal above leaves no claim behind.
        const claimed = await claimResumeKey(deps, state, info, fresh.replaceOwner);
        if (aborted() || !claimed) state.unconfigured.release(unconfigured);
        if (aborted()) return void (claimed && dropClaim(deps, state, resumeKey));
        if (!claimed) return refused(deps, who, res, KEY_IN_USE, 'resume_key_in_use');
        claim = resumeKey;
      }
      accepted(deps, who, up, { kind: 'new', info, unconfigured, claim, closed: false });
    });
  };
}
