// The load benchmark's upstream, in its own process so its CPU is nobody's: the emulator on a
// loopback port and, for the wss legs, a TLS terminator in front of it in a process of its own
// (tls-relay.mjs; a self-signed certificate given as TLS_CERT/TLS_KEY files).
// Prints one JSON line: { port, tlsPort, token }.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

process.env.LOG_LEVEL = 'silent';
const { startEmulator } = await import('../../../src/emulator/index.js');

// Few records kept: the benchmark reads transcripts from its clients, not from the emulator.
const emulator = await startEmulator({ port: 0, maxSessionRecords: 20, maxAudioBytes: 1 << 20 });
// Its stdin is its lifeline: it exits when this process goes, however it goes.
const relay = spawn(process.execPath, [new URL('./tls-relay.mjs', import.meta.url).pathname], {
  env: { ...process.env, TARGET_PORT: String(emulator.port) },
  stdio: ['pipe', 'pipe', 'inherit'],
});
const [line] = (await once(createInterface({ input: relay.stdout! }), 'line')) as [string];
const tlsPort = (JSON.parse(line) as { port: number }).port;
const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', expiresInSeconds: 4 * 3600 });
process.stdout.write(JSON.stringify({ port: emulator.port, tlsPort, token }) + '\n');
process.once('SIGTERM', () => {
  relay.kill();
  emulator.close().finally(() => process.exit(0));
});
