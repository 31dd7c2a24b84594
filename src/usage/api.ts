// The ops usage API (GET /v1/usage, /v1/usage/sessions, /v1/tenants, /v1/audit), transport-free: the
// server hands in method, path, query, Authorization and the caller's address and writes back status
// and JSON body. Shapes are fixed by openapi/usage.yaml; dashboards depend on them. Every call is
// audited (which token by name, path, tenant asked, outcome).
import { parseBearer } from '../auth/index.js';
import { ENDPOINTS, isEndpoint } from '../protocol/index.js';
import { errorMessage, type ErrorId } from '../protocol/index.js';
import { logger } from '../telemetry/index.js';
import {
  PAGE_SIZE,
  StoreUnavailable,
  addBucket,
  emptyBucket,
  fromMediaMs,
  fromMicro,
  type BucketRow,
  type Granularity,
  type SessionCursor,
  type UsageStore,
} from './model.js';
import { ALL_TENANTS_TOKEN, digest, matchToken, mayRead, type ApiToken } from './api-tokens.js';
import { usageInRange } from './range.js';

export interface UsageRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  authorization?: string;
  /** the caller's address, for the audit trail */
  address?: string;
  /** the socket's peer, for the audit trail */
  peer?: string;
}

export interface UsageApi {
  handle(req: UsageRequest): Promise<{ status: number; body: unknown } | null>;
}

/** What the API needs of the audit trail (src/audit's AuditTrail; declared here, as audit/ stands on
 * session/, which stands on usage/). query throws a RangeError for a cursor it did not give. */
export interface AuditLog {
  record(e: {
    event: 'usage_api_call';
    outcome: string;
    status: number;
    path: string;
    caller?: string;
    tenant?: string;
    address?: string;
    peer?: string;
    error?: string;
    /** a tenant the caller asked for and may not read (the event is kept under the caller's tenants) */
    asked?: string;
    /** whether the tenant's trail may be made for this event, or only added to */
    trail?: 'create' | 'existing';
  }): void;
  query(q: {
    tenant: string;
    from: number;
    to: number;
    limit: number;
    cursor?: string;
  }): Promise<{ events: unknown[]; next: string | null }>;
}

type Reply = { status: number; body: unknown };
const PATHS = new Set(['/v1/usage', '/v1/usage/sessions', '/v1/tenants', '/v1/audit']);
/** Audit events a page, unless `limit` asks for fewer. */
const AUDIT_PAGE_SIZE = 100;
const AUDIT_MAX_PAGE_SIZE = 1000;
/** A date, or a date-time with its offset: without one, the instant would depend on the host's time zone. */
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** The instant `v` names, or NaN: not ISO 8601, or a day or time that does not exist (2025-02-30, 24:00). */
function isoInstant(v: string): number {
  const m = ISO.exec(v);
  if (!m) return NaN;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map((x) => Number(x ?? 0)); // time fields absent: 00:00:00
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) return NaN;
  return Date.parse(v);
}

class BadRequest extends Error {}

const fail = (id: ErrorId, details: string): Reply => {
  const body = errorMessage(id, details);
  return { status: body.error.status, body };
};

export class UsageHttpApi implements UsageApi {
  private readonly tokens: readonly ApiToken[];

  /** `access`: the tokens that may call (loadApiTokens), or the one all-tenant USAGE_API_TOKEN. */
  constructor(
    private readonly store: UsageStore,
    access: readonly ApiToken[] | string | undefined,
    private readonly audit?: AuditLog,
  ) {
    this.tokens =
      typeof access === 'string'
        ? [{ name: ALL_TENANTS_TOKEN, digest: digest(access), tenants: 'all' }]
        : (access ?? []);
  }

  async handle(req: UsageRequest): Promise<Reply | null> {
    if (!PATHS.has(req.path)) return null;
    const caller = this.authorize(req.authorization);
    const reply = 'status' in caller ? caller : await this.answer(req, caller);
    this.audited(req, 'status' in caller ? undefined : caller, reply);
    return reply;
  }

  private async answer(req: UsageRequest, caller: ApiToken): Promise<Reply> {
    if (req.method.toUpperCase() !== 'GET') return fail('METHOD_NOT_ALLOWED', `${req.path} supports GET only`);
    try {
      if (req.path === '/v1/tenants') return await this.tenants(caller);
      const tenant = tenantParam(req.query);
      if (!mayRead(caller, tenant))
        return fail('USAGE_TENANT_FORBIDDEN', 'this usage API token may not read this tenant');
      if (req.path === '/v1/usage') return await this.usage(req.query, tenant);
      if (req.path === '/v1/audit') return await this.auditEvents(req.query, tenant);
      return await this.sessions(req.query, tenant);
    } catch (err) {
      if (err instanceof BadRequest) return fail('BAD_REQUEST', err.message);
      if (err instanceof StoreUnavailable)
        return fail('USAGE_STORE_UNAVAILABLE', 'The usage store cannot be read right now; retry later');
      logger.error({ err }, 'usage api failed');
      return fail('INTERNAL', 'The usage query failed');
    }
  }

  private authorize(header: string | undefined): Reply | ApiToken {
    if (this.tokens.length === 0) return fail('UNAUTHORIZED', 'USAGE_API_TOKEN is not set; the usage API is disabled');
    const token = parseBearer(header);
    // Fixed-length digests compared with every token: neither length, content nor which token leaks through timing.
    const found = token === undefined ? undefined : matchToken(this.tokens, token);
    return found ?? fail('UNAUTHORIZED', 'Missing or wrong bearer token');
  }

  /** One audit event per call: the token's name (never the token), the path, the tenant asked, the
   * answer. Kept in the trail of the tenant asked only if the caller may read it (and, for the
   * all-tenant token, only if that tenant has a trail: a made-up name makes none); a call for a tenant
   * the token may not read is kept in its own tenants' trails, never in the one it asked for. */
  private audited(req: UsageRequest, caller: ApiToken | undefined, reply: Reply): void {
    const error = (reply.body as { error?: { id?: string } }).error?.id;
    const call = {
      event: 'usage_api_call' as const,
      outcome: reply.status < 400 ? 'ok' : 'refused',
      status: reply.status,
      path: req.path,
      caller: caller?.name,
      address: req.address,
      peer: req.peer,
      error,
    };
    const asked = req.path === '/v1/tenants' ? null : req.query.get('tenant');
    if (!caller || !asked || !validTenant(asked)) return this.audit?.record(call);
    if (mayRead(caller, asked))
      return this.audit?.record({ ...call, tenant: asked, trail: caller.tenants === 'all' ? 'existing' : 'create' });
    for (const own of caller.tenants === 'all' ? [] : caller.tenants)
      this.audit?.record({ ...call, tenant: own, asked });
  }

  private async tenants(caller: ApiToken): Promise<Reply> {
    const all = await this.store.tenants();
    return { status: 200, body: { tenants: all.filter((t) => mayRead(caller, t)) } };
  }

  /** GET /v1/audit: the tenant's audit events in [from, to), oldest first, a page at a time. */
  private async auditEvents(q: URLSearchParams, tenant: string): Promise<Reply> {
    if (!this.audit) return fail('NOT_FOUND', 'this gateway keeps no audit trail');
    const from = timeParam(q, 'from', true)!;
    const to = timeParam(q, 'to', true)!;
    if (from >= to) throw new BadRequest('from must be before to');
    const limit = limitParam(q);
    let page;
    try {
      page = await this.audit.query({ tenant, from, to, limit, cursor: q.get('cursor') || undefined });
    } catch (err) {
      if (err instanceof RangeError) throw new BadRequest(err.message);
      logger.warn({ err: (err as Error).message }, 'audit store read failed');
      return fail('AUDIT_STORE_UNAVAILABLE', 'The audit store cannot be read right now; retry later');
    }
    const range = { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
    return { status: 200, body: { tenant, ...range, events: page.events, next: page.next } };
  }

  private async usage(q: URLSearchParams, tenant: string): Promise<Reply> {
    const from = timeParam(q, 'from', true)!;
    const to = timeParam(q, 'to', true)!;
    if (from >= to) throw new BadRequest('from must be before to');
    const g = q.get('granularity') ?? 'day';
    if (g !== 'hour' && g !== 'day') throw new BadRequest('granularity must be hour or day');
    const endpoint = q.get('endpoint');
    if (endpoint !== null && !isEndpoint(endpoint)) throw new BadRequest('endpoint must be transcribe or streams');
    const rows = await usageInRange(this.store, {
      tenant,
      granularity: g as Granularity,
      from,
      to,
      endpoints: endpoint ? [endpoint] : ENDPOINTS,
    });
    const total = emptyBucket(from);
    for (const r of rows) addBucket(total, r);
    return {
      status: 200,
      body: {
        tenant,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        granularity: g,
        total: figures(total),
        buckets: rows.map((r) => ({ start: new Date(r.start).toISOString(), ...figures(r) })),
      },
    };
  }

  private async sessions(q: URLSearchParams, tenant: string): Promise<Reply> {
    const from = timeParam(q, 'from', false) ?? 0;
    const to = timeParam(q, 'to', false) ?? Number.MAX_SAFE_INTEGER;
    if (from >= to) throw new BadRequest('from must be before to');
    const cursor = q.get('cursor');
    const page = await this.store.sessions({
      tenant,
      from,
      to,
      after: cursor ? decodeCursor(cursor) : null,
      limit: PAGE_SIZE,
    });
    return {
      status: 200,
      body: {
        sessions: page.rows.map((r) => ({
          sessionKey: r.sessionKey,
          upstreamSessionId: r.upstreamSessionId,
          tenant: r.tenant,
          endpoint: r.endpoint,
          interactionId: r.interactionId,
          environment: r.environment,
          start: new Date(r.start).toISOString(),
          end: r.end === null ? null : new Date(r.end).toISOString(),
          credits: fromMicro(r.micro),
          estimated: r.estimated,
          outcome: r.outcome,
          mediaSeconds: r.mediaMs === null ? null : fromMediaMs(r.mediaMs),
          speechSeconds: r.speechMs === null ? null : fromMediaMs(r.speechMs),
          transcribedSpeechSeconds: r.coveredMs === null ? null : fromMediaMs(r.coveredMs),
          coverage: r.speechMs === null || r.coveredMs === null ? null : coverage(r.coveredMs, r.speechMs),
          gaps: r.gaps.map(([start, end, speech]) => ({
            start: fromMediaMs(start),
            end: fromMediaMs(end),
            speechSeconds: fromMediaMs(speech),
          })),
          moreGaps: r.moreGaps,
          segments: r.segments.map((g) => ({
            upstreamSessionId: g.upstreamSessionId,
            credits: fromMicro(g.micro),
            estimated: g.estimated,
          })),
        })),
        next: page.next ? encodeCursor(page.next) : null,
      },
    };
  }
}

/** A bucket's or a range's figures as the API shows them. */
function figures(b: BucketRow) {
  return {
    credits: fromMicro(b.micro),
    sessions: b.sessions,
    mediaSeconds: fromMediaMs(b.mediaMs),
    speechSeconds: fromMediaMs(b.speechMs),
    transcribedSpeechSeconds: fromMediaMs(b.coveredMs),
    coverage: coverage(b.coveredMs, b.speechMs),
  };
}

/** The share of the speech final transcripts cover, to 6 decimals; null without speech. */
const coverage = (coveredMs: number, speechMs: number): number | null =>
  speechMs > 0 ? Math.round((coveredMs / speechMs) * 1e6) / 1e6 : null;

const validTenant = (t: string): boolean => t.length <= 256 && !/[\s\0]/.test(t);

function tenantParam(q: URLSearchParams): string {
  const t = q.get('tenant');
  if (!t) throw new BadRequest('tenant is required');
  if (!validTenant(t)) throw new BadRequest('tenant is not a valid tenant name');
  return t;
}

function limitParam(q: URLSearchParams): number {
  const v = q.get('limit');
  if (v === null || v === '') return AUDIT_PAGE_SIZE;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > AUDIT_MAX_PAGE_SIZE)
    throw new BadRequest(`limit must be an integer from 1 to ${AUDIT_MAX_PAGE_SIZE}`);
  return n;
}

function timeParam(q: URLSearchParams, name: string, required: boolean): number | undefined {
  const v = q.get(name);
  if (v === null || v === '') {
    if (required) throw new BadRequest(`${name} is required (ISO 8601 date-time)`);
    return undefined;
  }
  const t = isoInstant(v);
  if (Number.isNaN(t)) throw new BadRequest(`${name} is not an ISO 8601 date, or date-time with its offset`);
  return t;
}

function encodeCursor(c: SessionCursor): string {
  return Buffer.from(JSON.stringify([c.start, c.key])).toString('base64url');
}

function decodeCursor(s: string): SessionCursor {
  try {
    const [start, key] = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown[];
    if (typeof start === 'number' && Number.isFinite(start) && typeof key === 'string') return { start, key };
  } catch {
    // fall through
  }
  throw new BadRequest('cursor is not a cursor this API returned');
}
