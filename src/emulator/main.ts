// Runs the emulator alone: `tsx src/emulator/main.ts` (port from EMULATOR_PORT, default 8081).
import { startEmulator } from './index.js';

const port = Number(process.env.EMULATOR_PORT ?? 8081);
const emulator = await startEmulator({ port });
process.stdout.write(
  `speech-service emulator (not speech recognition)\n` +
    `  sockets:  ${emulator.wsBase}/transcribe, ${emulator.wsBase}/interactions/{uuid}/streams\n` +
    `  auth:     ${emulator.authBase}/realms/{tenant}/protocol/openid-connect/token\n` +
    `  dev client (tenant base, loopback only): client_id=dev client_secret=dev-secret\n`,
);
const stop = () => {
  emulator.close().finally(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
