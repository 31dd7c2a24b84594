// The process: config from the environment, start, signals, drain. `npm start` runs this.
import { loadConfig } from './config.js';
import { captureNativeStderr, logger, writeStderrJson } from './telemetry/index.js';

// Before uWebSockets.js loads: its plain-text stderr lines become JSON log lines (telemetry/stderr.ts).
captureNativeStderr();

async function main(): Promise<void> {
  const config = loadConfig();
  logger.level = config.LOG_LEVEL;
  // Imported here, not at the top: a uWS binary that does not load is a start-up failure, logged as one.
  const { startGateway } = await import('./gateway.js');
  const gw = await startGateway(config);
  const { port, adminPort } = gw.server;
  logger.info(
    { port, adminPort },
    `speech-gateway listening on :${port} (admin: metrics, usage API, hop on :${adminPort})`,
  );
  if (gw.emulator) {
    const tokenUrl = `${gw.emulator.authBase}/realms/base/protocol/openid-connect/token`;
    process.stdout.write(
      [
        '',
        `speech-gateway is listening on http://localhost:${port} (sockets under /audio-bridge/v2/...)`,
        `Browser demo (microphone, dictation): http://localhost:${port}/`,
        `Metrics and the usage API (admin port): http://localhost:${adminPort}/metrics`,
        `Upstream: the embedded EMULATOR on ${gw.emulator.authBase} (a stand-in, not speech recognition).`,
        'Development token for tenant "base" (loopback only, client dev / dev-secret):',
        `  curl -s -d grant_type=client_credentials -d client_id=dev -d client_secret=dev-secret -d 'scope=openid transcribe' ${tokenUrl}`,
        'Stream a file through the gateway:',
        `  npm run stream -- test/fixtures/dictation.ogg            (add --streams for the ambient API)`,
        '',
      ].join('\n') + '\n',
    );
  }
  onStopSignals(() => gw.stop());
}

/**
 * Every SIGTERM/SIGINT is handled for the whole drain: a group signal reaches this process and npm,
 * which forwards it again, and a second default-action signal would kill the drain halfway.
 */
function onStopSignals(stop: () => Promise<void>): void {
  let draining = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (draining) return logger.info({ signal }, 'already draining');
    draining = true;
    logger.info({ signal }, 'draining');
    stop().then(
      () => process.exit(0),
      (err: Error) => {
        logger.error({ err: err.message }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, onSignal);
}

main().catch((err: Error) => {
  // Said on stderr too (a JSON line): a start-up failure must be visible whatever LOG_LEVEL is.
  logger.fatal({ err: err.message }, 'speech-gateway failed to start');
  writeStderrJson('fatal', `speech-gateway failed to start: ${err.message}`);
  process.exit(1);
});
