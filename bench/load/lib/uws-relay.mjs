// The floor of the gateway's own stack: its two sockets and nothing between them. uWS takes the
// client, the gateway's upstream client (dist/src/upstream, built by the benchmark) opens the
// upstream, and frames pass as they come: no token check, no protocol, no audio handling, no replay.
// What the gateway costs above this peer is its own work; what this peer costs above nginx is the
// runtime's (JavaScript, V8's heap, libuv and uWS per message). Plain JavaScript run by plain node.
// Usage: UPSTREAM=ws://host:port/audio-bridge/v2 node uws-relay.mjs  (prints the port it listens on)
import uWS from 'uWebSockets.js';
// The build's, made by the benchmark (buildGateway) before this peer starts: a fresh clone has no dist/.
const { connectUpstream } = await import(new URL('../../../dist/src/upstream/index.js', import.meta.url).href);

const wsBase = process.env.UPSTREAM;
/** Client frames that come before the upstream opens (the config, maybe audio): bounded. */
const MAX_EARLY = 64;
const app = uWS.App();

app.ws('/*', {
  compression: uWS.DISABLED,
  maxPayloadLength: 16 * 1024 * 1024,
  idleTimeout: 0,
  upgrade: (res, req, context) => {
    const query = new URLSearchParams(req.getQuery() ?? '');
    const target = {
      wsBase,
      endpoint: req.getUrl().endsWith('/streams') ? 'streams' : 'transcribe',
      tenant: query.get('tenant-name') ?? '',
      token: (query.get('token') ?? '').replace(/^Bearer /, ''),
    };
    const data = { target, up: undefined, early: [], closed: false };
    res.upgrade(
      data,
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  },
  open: (ws) => {
    const d = ws.getUserData();
    const gone = () => {
      if (d.closed) return;
      d.closed = true;
      ws.end(1000);
    };
    d.up = connectUpstream(
      d.target,
      {
        onOpen: () => d.early.splice(0).forEach((m) => d.up.send(m)),
        onMessage: (m, binary) => d.closed || ws.send(m, binary),
        onClose: gone,
        onError: gone,
      },
      { connectTimeoutMs: 10_000 },
    );
  },
  message: (ws, message, isBinary) => {
    const d = ws.getUserData();
    // uWS reuses `message` after this call: a binary frame is copied, a text frame decoded.
    const m = isBinary ? Buffer.from(new Uint8Array(message)) : Buffer.from(message).toString();
    if (d.up.isOpen) d.up.send(m);
    else if (d.early.length < MAX_EARLY) d.early.push(m);
  },
  close: (ws) => {
    const d = ws.getUserData();
    d.closed = true;
    d.up?.close(1000);
  },
});

app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('uws relay: could not listen');
  process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(socket) }) + '\n');
});
process.once('SIGTERM', () => process.exit(0));
