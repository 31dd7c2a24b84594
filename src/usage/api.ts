// The ops usage API (GET /v1/usage, /v1/usage/sessions, /v1/tenants), transport-free: the
// server hands in method, path, query and Authorization and writes back status and JSON body.
// Shapes are fixed by openapi/usage.yaml; dashboards depend on them.
import { createHash, timingSafeEqual } from 'node:crypto';
import { parseBearer } from '../auth/index.js';
import { ENDPOINTS, isEndpoint } from '../protocol/index.js';
import { errorMessage, type ErrorId } from '../protocol/index.js';
import { logger } from '../telemetry/index.js';
import {
  PAGE_SIZE,
  StoreUnavailable,
  fromMediaMs,
  fromMicro,
  type Granularity,
  type SessionCursor,
  type UsageStore,
} from './model.js';

export interface UsageApi {
  handle(req: {
    method: string;
    path: string;
    query: URLSearchParams;
    authorization?: string;
  }): Promise<{ status: number; body: unknown } | null>;
}

type Reply = { status: number; body: unknown };
const PATHS = new Set(['/v1/usage', '/v1/usage/sessions', '/v1/tenants']);
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

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export class UsageHttpApi implements UsageApi {
  private readonly tokenDigest: Buffer | null;

  constructor(
    private readonly store: UsageStore,
    apiToken: string | undefined,
  ) {
    this.tokenDigest = apiToken ? digest(apiToken) : null;
  }

  async handle(req: {
    method: string;
    path: string;
    query: URLSearchParams;
    authorization?: string;
  }): Promise<Reply | null> {
    if (!PATHS.has(req.path)) return null;
    const denied = this.authorize(req.authorization);
    if (denied) return denied;
    if (req.method.toUpperCase() !== 'GET') return fail('METHOD_NOT_ALLOWED', `${req.path} supports GET only`);
    try {
      if (req.path === '/v1/tenants') return { status: 200, body: { tenants: await this.store.tenants() } };
      if (req.path === '/v1/usage') return await this.usage(req.query);
      return await this.sessions(req.query);
    } catch (err) {
      if (err instanceof BadRequest) return fail('BAD_REQUEST', err.message);
      if (err instanceof StoreUnavailable)
        return fail('USAGE_STORE_UNAVAILABLE', 'The usage store cannot be read right now; retry later');
      logger.error({ err }, 'usage api failed');
      return fail('INTERNAL', 'The usage query failed');
    }
  }

  private authorize(header: string | undefined): Reply | null {
    if (!this.tokenDigest) return fail('UNAUTHORIZED', 'USAGE_API_TOKEN is not set; the usage API is disabled');
    const token = parseBearer(header);
    // Compare fixed-length digests so neither length nor content leaks through timing.
    if (token === undefined || !timingSafeEqual(digest(token), this.tokenDigest))
      return fail('UNAUTHORIZED', 'Missing or wrong bearer token');
    return null;
  }

  private async usage(q: URLSearchParams): Promise<Reply> {
    const tenant = tenantParam(q);
    const from = timeParam(q, 'from', true)!;
    const to = timeParam(q, 'to', true)!;
    if (from >= to) throw new BadRequest('from must be before to');
    const g = q.get('granularity') ?? 'day';
    if (g !== 'hour' && g !== 'day') throw new BadRequest('granularity must be hour or day');
    const endpoint = q.get('endpoint');
    if (endpoint !== null && !isEndpoint(endpoint)) throw new BadRequest('endpoint must be transcribe or streams');
    const rows = await this.store.buckets({
      tenant,
      granularity: g as Granularity,
      from,
      to,
      endpoints: endpoint ? [endpoint] : ENDPOINTS,
    });
    const total = rows.reduce(
      (t, r) => ({ micro: t.micro + r.micro, sessions: t.sessions + r.sessions, mediaMs: t.mediaMs + r.mediaMs }),
      { micro: 0, sessions: 0, mediaMs: 0 },
    );
    return {
      status: 200,
      body: {
        tenant,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        granularity: g,
        total: { credits: fromMicro(total.micro), sessions: total.sessions, mediaSeconds: fromMediaMs(total.mediaMs) },
        buckets: rows.map((r) => ({
          start: new Date(r.start).toISOString(),
          credits: fromMicro(r.micro),
          sessions: r.sessions,
          mediaSeconds: fromMediaMs(r.mediaMs),
        })),
      },
    };
  }

  private async sessions(q: URLSearchParams): Promise<Reply> {
    const tenant = tenantParam(q);
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

function tenantParam(q: URLSearchParams): string {
  const t = q.get('tenant');
  if (!t) throw new BadRequest('tenant is required');
  if (t.length > 256 || /[\s\0]/.test(t)) throw new BadRequest('tenant is not a valid tenant name');
  return t;
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
