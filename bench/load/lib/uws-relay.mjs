// The floor of the gateway's own stack: its two sockets and nothing between them. uWS takes the
// client, the gateway's upstream client (dist/src/upstream, built by the benchmark) opens the
// upstream, and frames pass as they come: no token check, no protocol, no audio handling, no replay.
// What the gateway costs above this peer is its own work; what this peer costs above nginx is the
// runtime's (JavaScript, V8's heap, libuv and uWS per message). Plain JavaScript run by plain node.
// With KEEP=finals it also keeps each audio frame, in memory of its own, until the second upstream
// final after it arrives (about as long as the gateway's replay keeps a piece until a final covers
// it): what the replay promise costs the runtime (its copies live a second or two, so V8 promotes
// them), without the gateway's parsing and bookkeeping.
// Usage: UPSTREAM=ws://host:port/audio-bridge/v2 [KEEP=finals] node uws-relay.mjs  (prints its port)
import uWS from 'uWebSockets.js';
// The build's, made by the benchmark (buildGateway) before this peer starts: a fresh clone has no dist/.
const { connectUpstream } = await import(new URL('../../../dist/src/upstream/index.js', import.meta.url).href);

const wsBase = process.env.UPSTREAM;
/** Client frames that come before the upstream opens (the config, maybe audio): bounded. */
const MAX_EARLY = 64;
const keep = process.env.KEEP === 'finals';
/** Frames kept for one session at most (about a minute of 250 ms pieces) should no final come. */
const MAX_KEPT = 256;
/** How a final shows in the upstream's transcript bytes. */
const FINAL = Buffer.from('"isFinal":true');
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
    const data = { target, up: undefined, early: [], closed: false, kept: [], keptAtFinal: 0 };
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
        onMessage: (m, binary) => {
          if (keep && !binary && m.indexOf(FINAL) >= 0) release(d);
          if (!d.closed) ws.send(m, binary);
        },
        onClose: gone,
        onError: gone,
      },
      { connectTimeoutMs: 10_000 },
    );
  },
  message: (ws, message, isBinary) => {
    const d = ws.getUserData();
    // uWS reuses `message` after this call: a binary frame is copied, a text frame decoded.
    // Kept frames get memory of their own (ArrayBuffer.slice), not a slice of Node's shared pool.
    const m = !isBinary
      ? Buffer.from(message).toString()
      : keep
        ? Buffer.from(message.slice(0))
        : Buffer.from(new Uint8Array(message));
    if (keep && isBinary && d.kept.push(m) > MAX_KEPT) {
      d.kept.shift();
      d.keptAtFinal = Math.max(0, d.keptAtFinal - 1);
    }
    if (d.up.isOpen) d.up.send(m);
    else if (d.early.length < MAX_EARLY) d.early.push(m);
  },
  close: (ws) => {
    const d = ws.getUserData();
    d.closed = true;
    d.up?.close(1000);
  },
});

/** A final came: the frames kept before the previous final are covered now. */
function release(d) {
  d.kept.splice(0, d.keptAtFinal);
  d.keptAtFinal = d.kept.length;
}

app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('uws relay: could not listen');
  process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(socket) }) + '\n');
});
process.once('SIGTERM', () => process.exit(0));
