// Environment → one typed, validated config object. Validated once at start-up with precise
// errors (a bad value stops the process with the variable's name), then passed down explicitly.
import { z } from 'zod';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const int = (def: number) => z.coerce.number().int().nonnegative().default(def);

const schema = z.object({
  PORT: int(8080),
  HOST: z.string().default('0.0.0.0'),
  UPSTREAM_URL: z.string().url().optional(),
  AUTH_URL: z.string().url().optional(),
  EMULATOR_PORT: int(8081),
  REDIS_URL: z.string().optional(),
  UPSTREAM_AUTH: z.enum(['passthrough', 'client-credentials']).default('passthrough'),
  /** client-credentials mode: JSON file {"<tenant>":{"clientId","clientSecret"}} (a mounted Secret). */
  UPSTREAM_CREDENTIALS_FILE: z.string().optional(),
  /** client-credentials mode: the same JSON inline (environment from a Secret). */
  UPSTREAM_CREDENTIALS: z.string().optional(),
  USAGE_API_TOKEN: z.string().optional(),
  LOG_LEVEL: z.string().default('info'),
  CONFIG_TIMEOUT_MS: int(10_000),
  STREAM_MAX_SECONDS: int(7200),
  CHUNK_MS: int(250),
  PACE: z.coerce.number().positive().default(1.0),
  MAX_SESSIONS_PER_TENANT: int(0), // 0 = no cap
  RESUME_GRACE_SECONDS: int(30),
  DRAIN_SECONDS: int(30),
  /** Comma-separated origins; unset: only same-origin browsers (and clients sending no Origin). "*" allows any. */
  ALLOWED_ORIGINS: z.string().optional(),
  /** Allow full-access (non limited-scope) tokens from requests that carry an Origin header. */
  ALLOW_FULL_ACCESS_TOKENS_FROM_BROWSERS: bool.default('false'),
  /** Minimum time between JWKS refetches triggered by an unknown key id (rate limit). */
  JWKS_COOLDOWN_MS: int(30_000),
  /** Refuse to start on uWS's slow pure-JS fallback unless this is set. */
  ALLOW_UWS_FALLBACK: bool.default('false'),
  /** Per-session bound on audio buffered for pacing, in bytes. */
  MAX_BUFFERED_AUDIO_BYTES: int(8 * 1024 * 1024),
  USAGE_JOURNAL_DIR: z.string().default('.tmp/usage-journal'),
  USAGE_RETENTION_DAYS: int(400),
  METRICS_MAX_TENANTS: int(50),
});

export type GatewayConfig = z.infer<typeof schema> & { allowedOrigins: string[] | 'same-origin' | '*' };

export function loadConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const clean = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(clean);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const c = parsed.data;
  const raw = c.ALLOWED_ORIGINS?.trim();
  const allowedOrigins = !raw ? 'same-origin' : raw === '*' ? '*' : raw.split(',').map((s) => s.trim()).filter(Boolean);
  return { ...c, allowedOrigins };
}
