// Test support: a reverse proxy in a process of its own, as nginx or a mesh sidecar would sit in
// front of the gateway on the same host: every HTTP request is passed on to 127.0.0.1:TARGET_PORT
// from 127.0.0.1, with X-Forwarded-For naming the client (nginx's $proxy_add_x_forwarded_for).
// Prints {"port":n} once it listens on 127.0.0.1.
//   TARGET_PORT=n node --import tsx test/support/forwarding-proxy.ts
import { createServer, request } from 'node:http';

const target = Number(process.env.TARGET_PORT);

const server = createServer((req, res) => {
  const client = req.socket.remoteAddress ?? '';
  const forwardedFor = req.headers['x-forwarded-for'] ? `${req.headers['x-forwarded-for']}, ${client}` : client;
  const upstream = request(
    {
      host: '127.0.0.1',
      port: target,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, 'x-forwarded-for': forwardedFor },
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => res.writeHead(502).end());
  req.pipe(upstream);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
