// Test support: the browser demo's token route asked over plain node:http, where the test chooses
// what fetch would not let it: the address the connection comes from, and the Host header.
import { request } from 'node:http';

/** POST /demo/token on `host`:`port` (default 127.0.0.1), from `localAddress` if given, with `headers`. */
export function postDemoToken(
  port: number,
  o: { host?: string; localAddress?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const { host = '127.0.0.1', localAddress, headers } = o;
    const req = request({ host, port, localAddress, headers, method: 'POST', path: '/demo/token' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end();
  });
}
