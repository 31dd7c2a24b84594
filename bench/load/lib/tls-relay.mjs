// The wss legs' TLS terminator, in a process of its own: run inside the emulator's process, its TLS
// work and the emulator's shared one thread, and at 1,500 sessions every wss leg (nginx's too) backed
// up by seconds behind it. Decrypted bytes go to the emulator unchanged. Plain JavaScript run by
// plain node: no loader to pay for. It exits when its stdin closes (its parent is gone).
// Usage: TARGET_PORT=n TLS_CERT=file TLS_KEY=file node tls-relay.mjs  (prints the port it listens on)
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createServer } from 'node:tls';

const target = Number(process.env.TARGET_PORT);
const server = createServer(
  { cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) },
  (s) => {
    const plain = connect(target, '127.0.0.1');
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
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n'));
process.stdin.on('end', () => process.exit(0)).resume();
