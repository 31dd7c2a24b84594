// A whole gateway from one config object: the embedded emulator when no upstream is configured,
// auth, usage ledger, server. main.ts runs one; tests start several.
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
import { isNativeUws, startServer, type GatewayServer } from './server/index.js';
import type { SessionSettings } from './session/index.js';
import { initialiseCounters, logger, metrics, setMaxTenantLabels } from './telemetry/index.js';
import { createUsage, type Usage } from './usage/index.js';

export interface Gateway {
  server: GatewayServer;
  emulator?: Emulator;
  config: GatewayConfig;
  /** SIGTERM path: drain sessions, flush the usage journal, stop. */
  stop(): Promise<void>;
}

/** Starts a whole gateway from a config object (tests start several this way). */
/** Without UPSTREAM_URL or AUTH_URL, the embedded emulator stands in for the speech service. */
async function embeddedEmulator(config: GatewayConfig): Promise<Emulator | undefined> {
  if (config.UPSTREAM_URL && config.AUTH_URL) return undefined;
  // Imported only here: a gateway with a real upstream never loads the emulator (idle memory).
  const { startEmulator } = await import('./emulator/index.js');
  const emulator = await startEmulator({ port: config.EMULATOR_PORT, host: '127.0.0.1' });
  logger.warn(
    { emulator: emulator.authBase },
    'UPSTREAM_URL/AUTH_URL unset: using the embedded upstream EMULATOR (not speech recognition)',
  );
  return emulator;
}

/** What every session runs with, from the gateway's configuration. */
function sessionSettings(config: GatewayConfig, upstreamWsBase: string): SessionSettings {
  return {
    upstreamWsBase,
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
    redisUrl: config.REDIS_URL,
    retentionDays: config.AUDIT_RETENTION_DAYS,
    trustedProxies: config.TRUSTED_PROXIES,
    logger,
  });
  const usage = await createUsage({
    redisUrl: config.REDIS_URL,
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

  const emulator = await embeddedEmulator(config);
  const upstreamWsBase = config.UPSTREAM_URL ?? emulator!.wsBase;
  const authUrl = config.AUTH_URL ?? emulator!.authBase;

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
  const { audit, usage } = await accounting(config);

  const cluster = await createCluster({
    redisUrl: config.REDIS_URL,
    replicaId: config.REPLICA_ID,
    advertiseUrl: config.ADVERTISE_URL,
    secret: config.CLUSTER_SECRET,
    graceSeconds: config.RESUME_GRACE_SECONDS,
    logger,
  });
  const server = await startServer({
    cluster,
    host: config.HOST,
    port: config.PORT,
    auth,
    usageApi: usage.api,
    audit,
    observe: (info, on) => audit.attach(info, on),
    maxSessionsPerTenant: config.MAX_SESSIONS_PER_TENANT,
    maxUnconfiguredPerSubject: config.MAX_UNCONFIGURED_PER_SUBJECT,
    clientIdleSeconds: config.CLIENT_IDLE_SECONDS,
    demo: emulator ? { tokenUrl: `${emulator.authBase}/realms/base/protocol/openid-connect/token` } : undefined,
    credentials,
    ledger: usage.ledger,
    limiter: usage.limiter,
    logger,
    settings: sessionSettings(config, upstreamWsBase),
  });

  await cluster.start(server.port);
  let stopping: Promise<void> | undefined;
  return {
    server,
    emulator,
    config,
    stop() {
      stopping ??= (async () => {
        await server.drain(config.DRAIN_SECONDS);
        await cluster.close();
        await usage.close();
        await audit.close();
        auth.close();
        credentials.close();
        await emulator?.close();
        await closeDefaultEncoderPool();
      })();
      return stopping;
    },
  };
}
