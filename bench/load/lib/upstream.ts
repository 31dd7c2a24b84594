// The load benchmark's upstream, in its own process so its CPU is nobody's: the emulator on a
// loopback port and, for the TLS leg, a TLS terminator in front of it (a self-signed certificate
// given as TLS_CERT/TLS_KEY files) relaying the decrypted bytes to the emulator unchanged.
// Prints one JSON line: { port, tlsPort, token }.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createServer } from 'node:tls';
import type { AddressInfo } from 'node:net';

process.env.LOG_LEVEL = 'silent';
const { startEmulator } = await import('../../../src/emulator/index.js');

// Few records kept: the benchmark reads transcripts from its clients, not from the emulator.
const emulator = await startEmulator({ port: 0, maxSessionRecords: 20, maxAudioBytes: 1 << 20 });
const tls = createServer(
  { cert: readFileSync(process.env.TLS_CERT!), key: readFileSync(process.env.TLS_KEY!) },
  (s) => {
    const plain = connect(emulator.port, '127.0.0.1');
    s.setNoDelay(true); // small frames both ways: Nagle and delayed ACKs would add 40 ms to every reply
    plain.setNoDelay(true);
    const drop = () => {
      s.destroy();
      plain.destroy();
    };
    s.on('error', drop);
    plain.on('error', drop);
    s.pipe(plain).pipe(s);
  },
);
await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe', expiresInSeconds: 4 * 3600 });
process.stdout.write(
  JSON.stringify({ port: emulator.port, tlsPort: (tls.address() as AddressInfo).port, token }) + '\n',
);
process.once('SIGTERM', () => {
  tls.close();
  emulator.close().finally(() => process.exit(0));
});
