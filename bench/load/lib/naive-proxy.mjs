// The naive peer: a `ws` server and a `ws` client per connection, frames relayed as they come
// (what a fifty-line proxy looks like). Plain JavaScript run by plain node: no loader to pay for.
// Usage: UPSTREAM=ws://host:port node naive-proxy.mjs  (prints the port it listens on)
import WebSocket, { WebSocketServer } from 'ws';

const upstreamBase = process.env.UPSTREAM;
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });

wss.on('connection', (client, req) => {
  const upstream = new WebSocket(upstreamBase + req.url, { perMessageDeflate: false });
  const early = [];
  client.on('message', (data, isBinary) => {
    if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary: isBinary });
    else if (early.length < 64) early.push([data, isBinary]); // bounded: a client must wait for config anyway
  });
  upstream.on('open', () => {
    for (const [data, isBinary] of early.splice(0)) upstream.send(data, { binary: isBinary });
  });
  upstream.on('message', (data, isBinary) => client.send(data, { binary: isBinary }));
  const closeBoth = (code) => {
    const c = code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1011;
    if (client.readyState < WebSocket.CLOSING) client.close(c);
    if (upstream.readyState === WebSocket.OPEN) upstream.close(c);
    else if (upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
  };
  upstream.on('close', closeBoth);
  client.on('close', closeBoth);
  upstream.on('error', () => client.terminate());
  client.on('error', () => upstream.terminate());
});
wss.on('listening', () => process.stdout.write(JSON.stringify({ port: wss.address().port }) + '\n'));
process.once('SIGTERM', () => process.exit(0));
