// A whole gateway from one config object: per environment (data residency) its auth and upstream, or
// an embedded emulator when no upstream is configured; the usage ledger; the server. main.ts runs one; tests start several.
import { createAudit, type AuditTrail } from './audit/index.js';
import { closeDefaultEncoderPool } from './audio/index.js';
import {
  REFUSAL_REASONS,
  createAuthenticator,
  createUpstreamCredentials,
  loadUpstreamCredentials,
} from './auth/index.js';
import { createCluster } from './cluster/index.js';
import type { GatewayConfig } from './config.js';
import type { Emulator } from './emulator/index.js';
import type { EnvironmentConfig } from './environments.js';
import { redisSettings } from './redis/index.js';
import {
  isNativeUws,
  startServer,
  type Environments,
  type GatewayServer,
  type ServedEnvironment,
  type ServerDeps,
} from './server/index.js';
import { initialiseCounters, logger, metrics, setMaxTenantLabels } from './telemetry/index.js';
import { createUsage, type Usage } from './usage/index.js';

export interface Gateway {
  server: GatewayServer;
  /** the default environment's embedded emulator, if it has one */
  emulator?: Emulator;
  /** every environment's embedded emulator, by environment (none with real upstreams) */
  emulators: ReadonlyMap<string, Emulator>;
  config: GatewayConfig;
  /** SIGTERM path: drain sessions, flush the usage journal, stop. */
  stop(): Promise<void>;
}

/** An environment's emulator when it has no upstream configured (no environment has: environments.ts).
 * Each is its own process-local auth server with its own signing keys: one's tokens are not another's. */
async function embeddedEmulator(
  config: GatewayConfig,
  e: EnvironmentConfig,
  index: number,
): Promise<Emulator | undefined> {
  if (e.upstreamUrl && e.authUrl) return undefined;
  // Imported only here: a gateway with a real upstream never loads the emulator (idle memory).
  const { startEmulator } = await import('./emulator/index.js');
  const port = config.EMULATOR_PORT === 0 ? 0 : config.EMULATOR_PORT + index; // eu 8081, us 8082...
  if (port > 65535) throw new Error('EMULATOR_PORT plus the number of environments passes port 65535');
  const emulator = await startEmulator({ port, host: '127.0.0.1' });
  logger.warn(
    { environment: e.name, emulator: emulator.authBase },
    'no upstream configured: using the embedded upstream EMULATOR (not speech recognition)',
  );
  return emulator;
}

/** One environment's auth, upstream and credentials: its own, from its own auth server. */
function serveEnvironment(config: GatewayConfig, upstreamWsBase: string, authUrl: string): ServedEnvironment {
  const auth = createAuthenticator({
    authUrl,
    allowedOrigins: config.allowedOrigins,
    allowFullAccessFromBrowsers: config.ALLOW_FULL_ACCESS_TOKENS_FROM_BROWSERS,
    jwksCooldownMs: config.JWKS_COOLDOWN_MS,
    resumeGraceSeconds: config.RESUME_GRACE_SECONDS,
  });
  const credentials = createUpstreamCredentials({
    mode: config.UPSTREAM_AUTH,
    authUrl,
    credentials:
      config.UPSTREAM_AUTH === 'client-credentials'
        ? loadUpstreamCredentials({ file: config.UPSTREAM_CREDENTIALS_FILE, inline: config.UPSTREAM_CREDENTIALS })
        : undefined,
  });
  return { auth, upstreamWsBase, credentials };
}

/** Every environment served, with the emulators started for those without an upstream, by name. */
async function startEnvironments(
  config: GatewayConfig,
): Promise<{ environments: Environments; emulators: Map<string, Emulator> }> {
  const served = new Map<string, ServedEnvironment>();
  const emulators = new Map<string, Emulator>();
  for (const [i, e] of config.environments.entries()) {
    const emulator = await embeddedEmulator(config, e, i);
    if (emulator) emulators.set(e.name, emulator);
    const upstream = e.upstreamUrl ?? emulator!.wsBase;
    served.set(e.name, serveEnvironment(config, upstream, e.authUrl ?? emulator!.authBase));
  }
  return { environments: { defaultName: config.defaultEnvironment, served }, emulators };
}

/** What every session runs with, from the gateway's configuration. */
function sessionSettings(config: GatewayConfig): ServerDeps['settings'] {
  return {
    configTimeoutMs: config.CONFIG_TIMEOUT_MS,
    streamMaxSeconds: config.STREAM_MAX_SECONDS,
    chunkMs: config.CHUNK_MS,
    pace: config.PACE,
    maxBufferedAudioBytes: config.MAX_BUFFERED_AUDIO_BYTES,
    endTimeoutMs: config.END_TIMEOUT_MS,
    upstreamLiveness: {
      pingMs: config.UPSTREAM_PING_SECONDS * 1000,
      pongTimeoutMs: config.UPSTREAM_PONG_TIMEOUT_SECONDS * 1000,
    },
    resumeGraceSeconds: config.RESUME_GRACE_SECONDS,
    stallSpeechSeconds: config.STALL_SPEECH_SECONDS,
    reconnect: {
      attempts: config.UPSTREAM_RECONNECT_ATTEMPTS,
      maxSeconds: config.UPSTREAM_RECONNECT_SECONDS,
      replayBytes: config.REPLAY_BUFFER_BYTES,
    },
  };
}

/** The audit trail, and the usage ledger, limits and API (which audits its calls and answers GET /v1/audit). */
async function accounting(config: GatewayConfig): Promise<{ audit: AuditTrail; usage: Usage }> {
  const audit = await createAudit({
    file: config.AUDIT_LOG_FILE,
    redis: redisSettings(config),
    retentionDays: config.AUDIT_RETENTION_DAYS,
    trustedProxies: config.TRUSTED_PROXIES,
    trustedProxyCidrs: config.TRUSTED_PROXY_CIDRS,
    clusterSecret: config.CLUSTER_SECRET,
    maxBytes: config.AUDIT_STORE_MAX_BYTES,
    tenantMaxBytes: config.AUDIT_STORE_TENANT_MAX_BYTES,
    coalesceSeconds: config.AUDIT_COALESCE_SECONDS,
    logger,
  });
  const usage = await createUsage({
    redis: redisSettings(config),
    journalDir: config.USAGE_JOURNAL_DIR,
    retentionDays: config.USAGE_RETENTION_DAYS,
    maxSessionsPerTenant: config.MAX_SESSIONS_PER_TENANT,
    apiToken: config.USAGE_API_TOKEN,
    apiTokensFile: config.USAGE_API_TOKENS_FILE,
    apiTokens: config.USAGE_API_TOKENS,
    audit,
  });
  return { audit, usage };
}

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  if (!isNativeUws() && !config.ALLOW_UWS_FALLBACK) {
    throw new Error(
      'uWebSockets.js native binary did not load (pure-JS fallback active); set ALLOW_UWS_FALLBACK=true to run anyway',
    );
  }
  setMaxTenantLabels(config.METRICS_MAX_TENANTS);
  initialiseCounters(REFUSAL_REASONS); // alerts and rate() see 0, not nothing, before the first event
  metrics.tenantSessionCap.set(config.MAX_SESSIONS_PER_TENANT); // alerts compare sessions per tenant with it

  const { environments, emulators } = await startEnvironments(config);
  const emulator = emulators.get(config.defaultEnvironment);
  const { audit, usage } = await accounting(config);

  const cluster = await createCluster({
    redis: redisSettings(config),
    replicaId: config.REPLICA_ID,
    advertiseUrl: config.ADVERTISE_URL,
    secret: config.CLUSTER_SECRET,
    legacyRecordsUntil: config.LEGACY_RECORDS_UNTIL,
    graceSeconds: config.RESUME_GRACE_SECONDS,
    logger,
  });
  const server = await startServer({
    cluster,
    host: config.HOST,
    port: config.PORT,
    adminPort: config.ADMIN_PORT,
    environments,
    usageApi: usage.api,
    audit,
    observe: (info, on) => audit.attach(info, on),
    maxSessionsPerTenant: config.MAX_SESSIONS_PER_TENANT,
    maxUnconfiguredPerToken: config.MAX_UNCONFIGURED_PER_TOKEN,
    maxUnconfiguredPerSubject: config.MAX_UNCONFIGURED_PER_SUBJECT,
    clientIdleSeconds: config.CLIENT_IDLE_SECONDS,
    demo: emulator ? { tokenUrl: `${emulator.authBase}/realms/base/protocol/openid-connect/token` } : undefined,
    ledger: usage.ledger,
    limiter: usage.limiter,
    logger,
    settings: sessionSettings(config),
  });

  await cluster.start(server.adminPort); // the hop is on the admin port
  let stopping: Promise<void> | undefined;
  const closers: Array<() => unknown> = [() => cluster.close(), () => usage.close(), () => audit.close()];
  for (const e of environments.served.values())
    closers.push(
      () => e.auth.close(),
      () => e.credentials.close(),
    );
  for (const e of emulators.values()) closers.push(() => e.close());
  return {
    server,
    emulator,
    emulators,
    config,
    stop: () => (stopping ??= stopAll(server, config.DRAIN_SECONDS, closers)),
  };
}

/** The drain, then each part in order; the admin port last, so /metrics answers until the rest is done. */
async function stopAll(server: GatewayServer, drainSeconds: number, closers: Array<() => unknown>): Promise<void> {
  try {
    await server.drain(drainSeconds);
    for (const close of closers) await close();
    await closeDefaultEncoderPool();
  } finally {
    server.close();
  }
}
