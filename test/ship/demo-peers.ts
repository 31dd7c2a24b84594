// Run by browser-demo.test.ts in a network namespace of its own (support/netns.ts), where
// DEMO_PEER_ADDRESS is a local address that is not loopback: a gateway with the embedded emulator
// on every interface, and POST /demo/token from each kind of peer. Prints one JSON object, each
// peer's answer status by name.
import { postDemoToken } from '../support/demo-token.js';
import { startStack } from '../support/stack.js';

/** The answer's status; the Host header names loopback, so only the peer's address differs. */
const status = async (port: number, host: string, localAddress: string) =>
  (await postDemoToken(port, { host, localAddress, headers: { host: `localhost:${port}` } })).status;

const outside = process.env.DEMO_PEER_ADDRESS ?? '';
const stack = await startStack({ HOST: '::' });
const port = stack.gateway.server.port;
const statuses = {
  /** a client at an address that is not loopback */
  other: await status(port, outside, outside),
  /** a mesh sidecar's inbound hop: loopback's 127.0.0.0/8, but not 127.0.0.1 */
  sidecar: await status(port, '127.0.0.1', '127.0.0.6'),
  ipv4: await status(port, '127.0.0.1', '127.0.0.1'),
  ipv6: await status(port, '::1', '::1'),
};
await stack.close();
process.stdout.write(`${JSON.stringify(statuses)}\n`);
process.exit(0);
