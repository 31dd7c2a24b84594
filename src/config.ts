// Environment → one typed, validated config object. Validated once at start-up with precise
// errors (a bad value stops the process with the variable's name and what it accepts), then
// passed down explicitly. Messages never repeat a value: some of these variables hold secrets.
import { z } from 'zod';
import { trustedProxyList } from './audit/index.js';
import { parseEnvironments, type EnvironmentsConfig } from './environments.js';
import { LOG_QUEUE_DEFAULT, LOG_QUEUE_MAX, LOG_QUEUE_MIN } from './telemetry/index.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { errorMap: () => ({ message: `must be one of ${values.join(', ')}` }) });
const bool = oneOf(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const number = (integer: boolean, min: number, max: number, def: number) => {
  const message = `must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}`;
  const n = z.coerce
    .number({ errorMap: () => ({ message }) })
    .min(min, message)
    .max(max, message);
  return (integer ? n.int(message) : n).default(def);
};
const int = (min: number, max: number, def: number) => number(true, min, max, def);
const port = (def: number) => int(0, 65535, def);
/** A URL with one of `schemes`, its scheme lower-cased: a client library may read `REDISS://` as no TLS. */
const url = (...schemes: string[]) => {
  const message = `must be a ${schemes.join(' or ')} URL`;
  return z
    .string()
    .refine((v) => URL.canParse(v) && schemes.includes(new URL(v).protocol.slice(0, -1)), message)
    .transform((v) => v.replace(/^[a-z][a-z0-9+.-]*:/i, (scheme) => scheme.toLowerCase()));
};

/** "*", or origins as browsers send them (scheme, host, optional port): an entry without its scheme never matches one. */
function originList(v: string): boolean {
  if (v.trim() === '*') return true;
  return v
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean)
    .every((o) => URL.canParse(o) && ['http:', 'https:'].includes(new URL(o).protocol) && new URL(o).host !== '');
}

/** Comma-separated IP addresses or CIDR ranges, as a list (empty entries dropped). */
const cidrEntries = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
function cidrList(v: string): boolean {
  try {
    trustedProxyList(cidrEntries(v));
    return true;
  } catch {
    return false;
  }
}

/** host:port, the host a name or an IPv4 address or an IPv6 one in brackets; a port from 1 to 65535. */
const SENTINEL = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/;
const sentinelEntries = (v: string) => v.split(',').map((s) => SENTINEL.exec(s.trim()));
function sentinelList(v: string): boolean {
  return sentinelEntries(v).every((m) => m !== null && Number(m[3]) >= 1 && Number(m[3]) <= 65535);
}
function parseSentinels(v: string): Array<{ host: string; port: number }> {
  return sentinelEntries(v).map((m) => ({ host: m![1] ?? m![2], port: Number(m![3]) }));
}

const schema = z
  .object({
    PORT: port(8080),
    /** /metrics, the usage API (/v1/*) and the internal hop: a port for the cluster's inside, never public. */
    ADMIN_PORT: port(9090),
    HOST: z.string().default('0.0.0.0'),
    UPSTREAM_URL: url('ws', 'wss').optional(),
    AUTH_URL: url('http', 'https').optional(),
    EMULATOR_PORT: port(8081),
    /** A single Redis; or, instead, a primary found through Sentinel (the REDIS_SENTINEL* variables below). */
    REDIS_URL: url('redis', 'rediss').optional(),
    /** Comma-separated host:port of the sentinels. */
    REDIS_SENTINELS: z
      .string()
      .refine(sentinelList, 'must be comma-separated host:port (sentinel-0.example:26379,[fd00::1]:26379)')
      .transform(parseSentinels)
      .optional(),
    /** The primary's name the sentinels monitor (their `sentinel monitor <name> ...`). */
    REDIS_SENTINEL_NAME: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,100}$/, 'must be 1-100 characters of A-Z a-z 0-9 . _ -')
      .optional(),
    /** Instead of both: Redis Cluster, comma-separated host:port of some of its nodes (the client finds the rest). */
    REDIS_CLUSTER_NODES: z
      .string()
      .refine(sentinelList, 'must be comma-separated host:port (redis-0.example:6379,[fd00::1]:6379)')
      .transform(parseSentinels)
      .optional(),
    /** With REDIS_CLUSTER_NODES: TLS to every node (trust: the system's CAs and NODE_EXTRA_CA_CERTS). */
    REDIS_CLUSTER_TLS: bool.default('false'),
    /** With Sentinel: TLS to the sentinels and the data nodes (trusted as rediss:// is). */
    REDIS_SENTINEL_TLS: bool.default('false'),
    /** With Sentinel or Cluster: the data nodes' ACL user and password (REDIS_URL carries its own). */
    REDIS_USERNAME: z.string().regex(/^\S+$/, 'must contain no whitespace').optional(),
    REDIS_PASSWORD: z
      .string()
      .regex(/^\S+$/, 'must contain no whitespace (a trailing newline from a file?)')
      .optional(),
    /** With Sentinel: the sentinels' own AUTH. */
    REDIS_SENTINEL_PASSWORD: z
      .string()
      .regex(/^\S+$/, 'must contain no whitespace (a trailing newline from a file?)')
      .optional(),
    UPSTREAM_AUTH: oneOf(['passthrough', 'client-credentials']).default('passthrough'),
    /** client-credentials mode: JSON file {"<tenant>":{"clientId","clientSecret"}} (a mounted Secret). */
    UPSTREAM_CREDENTIALS_FILE: z.string().optional(),
    /** client-credentials mode: the same JSON inline (environment from a Secret). */
    UPSTREAM_CREDENTIALS: z.string().optional(),
    /** Compared with the bearer of `Authorization: Bearer <token>`, which has no whitespace: one with any would never match. */
    USAGE_API_TOKEN: z
      .string()
      .regex(/^\S+$/, 'must contain no whitespace (a trailing newline from a file?)')
      .optional(),
    /** Usage API tokens that read only their tenants: a JSON file {"<name>":{"token","tenants":[...]}} (a mounted Secret)... */
    USAGE_API_TOKENS_FILE: z.string().optional(),
    /** ...or the same JSON inline. */
    USAGE_API_TOKENS: z.string().optional(),
    /** Audit events as JSON lines appended to this file (0600); unset: stdout with "stream":"audit". */
    AUDIT_LOG_FILE: z.string().optional(),
    /** How long GET /v1/audit keeps a tenant's events: 2190 days = 6 years, HIPAA's documentation retention. */
    AUDIT_RETENTION_DAYS: int(1, 3650, 2190),
    /** The query store's bytes in all (Redis or memory); unset: 1 GiB in Redis, 32 MiB in process memory. */
    AUDIT_STORE_MAX_BYTES: int(1024 * 1024, 2 ** 40, 0)
      .removeDefault()
      .optional(),
    /** One tenant's trail at most (and never more than its share of AUDIT_STORE_MAX_BYTES). */
    AUDIT_STORE_TENANT_MAX_BYTES: int(64 * 1024, 2 ** 40, 64 * 1024 * 1024),
    /** Identical refusals and usage API calls within this window are one event with a count. */
    AUDIT_COALESCE_SECONDS: int(1, 3600, 60),
    /** Proxies in front of the gateway that append to X-Forwarded-For: the client is the Nth address from its right. */
    TRUSTED_PROXIES: int(0, 20, 0),
    /** The proxies' address ranges: X-Forwarded-For is read only from a peer in one of them (unset: from none). */
    TRUSTED_PROXY_CIDRS: z
      .string()
      .refine(cidrList, 'must be comma-separated IP addresses or CIDR ranges (10.0.0.0/8,fd00::/8)')
      .transform(cidrEntries)
      .default(''),
    LOG_LEVEL: oneOf(LOG_LEVELS).default('info'),
    /** Bytes of log and audit lines that may wait for a slow reader of stdout; past them lines are dropped, counted. */
    LOG_QUEUE_BYTES: int(LOG_QUEUE_MIN, LOG_QUEUE_MAX, LOG_QUEUE_DEFAULT),
    CONFIG_TIMEOUT_MS: int(100, 600_000, 10_000),
    /** The upstream ends /streams connections at 2 hours whatever we set. */
    STREAM_MAX_SECONDS: int(1, 7200, 7200),
    CHUNK_MS: int(20, 1000, 250),
    /** Below real time a live client's audio only piles up; far above it is for tests. */
    PACE: number(false, 1, 1000, 1.0),
    MAX_SESSIONS_PER_TENANT: int(0, 1_000_000, 0), // 0 = no cap
    /** Open sockets that have not sent a valid config, per token and replica (0 = no bound)... */
    MAX_UNCONFIGURED_PER_TOKEN: int(0, 1_000_000, 10),
    /** ...and per token subject: all tokens of one client-credentials client share it (a backstop). */
    MAX_UNCONFIGURED_PER_SUBJECT: int(0, 1_000_000, 100),
    RESUME_GRACE_SECONDS: int(0, 3600, 30),
    DRAIN_SECONDS: int(0, 3600, 30),
    /** How long the upstream has to answer `end` (remaining output, usage, end message). */
    END_TIMEOUT_MS: int(100, 600_000, 30_000),
    /** A half-open upstream: a ping after this long without a frame from it... */
    UPSTREAM_PING_SECONDS: number(false, 0.1, 3600, 15),
    /** ...and nothing within this long after the ping: the upstream is dead (UPSTREAM_UNAVAILABLE). */
    UPSTREAM_PONG_TIMEOUT_SECONDS: number(false, 0.1, 600, 10),
    /** A half-open client: uWS pings it after a quiet spell and closes it at this many seconds (its limits: 8-960). */
    CLIENT_IDLE_SECONDS: int(8, 960, 30),
    /** An upstream lost mid-session is replaced: at most this many attempts... */
    UPSTREAM_RECONNECT_ATTEMPTS: int(0, 100, 6),
    /** ...within this long after the loss (0 attempts: the session ends with the upstream). */
    UPSTREAM_RECONNECT_SECONDS: int(1, 600, 30),
    /** An upstream session sent this many seconds of speech without a transcript message since (its
     *  socket otherwise healthy) has stalled: it is replaced as a lost one. 0: never. */
    STALL_SPEECH_SECONDS: number(false, 0, 3600, 10),
    /** Per-session bound on audio kept to replay to a new upstream session (what no final transcript covers yet). */
    REPLAY_BUFFER_BYTES: int(64_000, 1 << 30, 8 * 1024 * 1024),
    /** Comma-separated origins; unset: only same-origin browsers (and clients sending no Origin). "*" allows any. */
    ALLOWED_ORIGINS: z
      .string()
      .refine(originList, 'must be * or comma-separated origins with their scheme (https://app.example.org)')
      .optional(),
    /** Allow full-access (non limited-scope) tokens from requests that carry an Origin header. */
    ALLOW_FULL_ACCESS_TOKENS_FROM_BROWSERS: bool.default('false'),
    /** Minimum time between JWKS refetches triggered by an unknown key id (rate limit). */
    JWKS_COOLDOWN_MS: int(0, 3_600_000, 30_000),
    /** Refuse to start on uWS's slow pure-JS fallback unless this is set. */
    ALLOW_UWS_FALLBACK: bool.default('false'),
    /** Per-session bound on audio buffered for pacing, in bytes; at least one 64000-byte frame. */
    MAX_BUFFERED_AUDIO_BYTES: int(64_000, 1024 ** 3, 8 * 1024 * 1024),
    USAGE_JOURNAL_DIR: z.string().default('.tmp/usage-journal'),
    USAGE_RETENTION_DAYS: int(1, 3650, 400),
    METRICS_MAX_TENANTS: int(0, 10_000, 50),
    /** Shared by the replicas: signs the internal hop (a resume carried to the session's replica). Unset: no hop. */
    CLUSTER_SECRET: z.string().min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)').optional(),
    /** Until when session records of the release before (version 2: only four clear fields bound to
     *  their seal, no MAC) are still read, for a rolling update from it: an ISO 8601 time, or `none`;
     *  unset: LEGACY_RECORDS_READ_UNTIL (src/cluster/records.ts). */
    LEGACY_RECORDS_UNTIL: z
      .string()
      .refine(
        (v) => v === 'none' || !Number.isNaN(Date.parse(v)),
        'must be an ISO 8601 time (2027-03-01T00:00:00Z) or none',
      )
      .optional()
      .transform((v) => (v === undefined ? undefined : v === 'none' ? 0 : Date.parse(v))),
    /** This replica's address for the internal hop (the pod IP in Kubernetes); default ws://127.0.0.1:<ADMIN_PORT>. */
    ADVERTISE_URL: url('ws', 'wss').optional(),
    /** This replica's name in session records and its heartbeat; default <hostname>-<pid>-<random>. */
    REPLICA_ID: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,100}$/, 'must be 1-100 characters of A-Z a-z 0-9 . _ -')
      .optional(),
  })
  .superRefine((c, ctx) => {
    // Two listeners: one port for both would fail at start with a less helpful "could not listen".
    if (c.PORT !== 0 && c.PORT === c.ADMIN_PORT) {
      ctx.addIssue({
        code: 'custom',
        path: ['ADMIN_PORT'],
        message: 'is the same as PORT: the admin port (metrics, usage API, hop) needs a port of its own',
      });
    }
    // One without the other would mix the real service with the emulator's tokens.
    if (!c.UPSTREAM_URL !== !c.AUTH_URL) {
      ctx.addIssue({
        code: 'custom',
        path: [c.UPSTREAM_URL ? 'AUTH_URL' : 'UPSTREAM_URL'],
        message: 'is unset: set both UPSTREAM_URL and AUTH_URL (a real upstream) or neither (the embedded emulator)',
      });
    }
    redisIssues(c).forEach(([path, message]) => ctx.addIssue({ code: 'custom', path: [path], message }));
    if (c.UPSTREAM_AUTH === 'client-credentials' && !c.UPSTREAM_CREDENTIALS_FILE && !c.UPSTREAM_CREDENTIALS) {
      ctx.addIssue({
        code: 'custom',
        path: ['UPSTREAM_AUTH'],
        message: 'is client-credentials, which needs UPSTREAM_CREDENTIALS_FILE or UPSTREAM_CREDENTIALS',
      });
    }
  });

/** REDIS_URL, Sentinel or Cluster, one of them; Sentinel's name with its sentinels; the credentials only
 * where REDIS_URL does not carry them. */
function redisIssues(c: {
  REDIS_URL?: string;
  REDIS_SENTINELS?: unknown;
  REDIS_CLUSTER_NODES?: unknown;
  REDIS_CLUSTER_TLS?: boolean;
  REDIS_SENTINEL_TLS?: boolean;
  REDIS_SENTINEL_NAME?: string;
  REDIS_USERNAME?: string;
  REDIS_PASSWORD?: string;
  REDIS_SENTINEL_PASSWORD?: string;
}): Array<[string, string]> {
  const issues: Array<[string, string]> = [];
  if (c.REDIS_URL && (c.REDIS_SENTINELS || c.REDIS_SENTINEL_NAME)) {
    issues.push([
      'REDIS_URL',
      'is set with Sentinel: set REDIS_URL (one Redis) or REDIS_SENTINELS and REDIS_SENTINEL_NAME',
    ]);
  } else if (!c.REDIS_SENTINELS !== !c.REDIS_SENTINEL_NAME) {
    const missing = c.REDIS_SENTINELS ? 'REDIS_SENTINEL_NAME' : 'REDIS_SENTINELS';
    issues.push([missing, 'is unset: Sentinel needs both REDIS_SENTINELS and REDIS_SENTINEL_NAME']);
  }
  if (c.REDIS_CLUSTER_NODES && (c.REDIS_URL || c.REDIS_SENTINELS || c.REDIS_SENTINEL_NAME)) {
    const other = c.REDIS_URL ? 'REDIS_URL' : 'Sentinel';
    issues.push([
      'REDIS_CLUSTER_NODES',
      `is set with ${other}: set one of REDIS_URL, REDIS_SENTINELS (with REDIS_SENTINEL_NAME) or REDIS_CLUSTER_NODES`,
    ]);
  }
  if (c.REDIS_SENTINEL_TLS && !c.REDIS_SENTINELS)
    issues.push(['REDIS_SENTINEL_TLS', 'is set without REDIS_SENTINELS (REDIS_URL says TLS by rediss://)']);
  if (c.REDIS_CLUSTER_TLS && !c.REDIS_CLUSTER_NODES)
    issues.push(['REDIS_CLUSTER_TLS', 'is set without REDIS_CLUSTER_NODES (REDIS_URL says TLS by rediss://)']);
  if (c.REDIS_SENTINEL_PASSWORD && !c.REDIS_SENTINELS) {
    issues.push(['REDIS_SENTINEL_PASSWORD', 'is set without REDIS_SENTINELS: it is for Sentinel']);
  }
  for (const name of ['REDIS_USERNAME', 'REDIS_PASSWORD'] as const) {
    if (c[name] && !c.REDIS_SENTINELS && !c.REDIS_CLUSTER_NODES) {
      issues.push([
        name,
        'is set without REDIS_SENTINELS or REDIS_CLUSTER_NODES: it is for Sentinel or Cluster (REDIS_URL carries its own credentials)',
      ]);
    }
  }
  if (c.REDIS_USERNAME && !c.REDIS_PASSWORD) issues.push(['REDIS_USERNAME', 'is set without REDIS_PASSWORD']);
  return issues;
}

/** `environments`/`defaultEnvironment`: ENVIRONMENTS, UPSTREAM_URL_<ENV>... (environments.ts). */
export type GatewayConfig = z.infer<typeof schema> &
  EnvironmentsConfig & { allowedOrigins: string[] | 'same-origin' | '*' };

export function loadConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const clean = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(clean);
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`);
  const residency = parseEnvironments(clean, problems);
  if (!parsed.success || problems.length > 0) throw new Error(`invalid configuration: ${problems.join('; ')}`);
  const c = parsed.data;
  const raw = c.ALLOWED_ORIGINS?.trim();
  const allowedOrigins = !raw
    ? 'same-origin'
    : raw === '*'
      ? '*'
      : raw
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
  return { ...c, ...residency, allowedOrigins };
}
