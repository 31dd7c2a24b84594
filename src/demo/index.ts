// The browser demo, served by the gateway only when it runs the embedded emulator: the page at /,
// its script and style, and POST /demo/token. The token is fetched by the gateway from the
// emulator's token endpoint (development client dev / dev-secret, which stays on the server), so
// the page talks to its own origin only: no CORS on the emulator, and the socket's default
// same-origin rule holds. Tokens go to a browser on this machine reaching the gateway directly
// (local-client.ts), as the emulator's own port serves loopback only.
import type uWS from 'uWebSockets.js';
import { gatewayError } from '../protocol/index.js';
import type { Logger } from '../telemetry/index.js';
import { asyncHttp, refuseRequest, sendJson } from '../http/index.js';
import { DEMO_CSS, DEMO_HTML, DEMO_JS } from './assets.js';
import { isLocalBrowser } from './local-client.js';

export interface DemoOptions {
  /** the emulator's token endpoint for tenant base */
  tokenUrl: string;
}

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const TOKEN_TIMEOUT_MS = 5000;

export function addDemoRoutes(app: uWS.TemplatedApp, demo: DemoOptions, log: Logger): void {
  app
    .get('/', (res) => sendFile(res, 'text/html; charset=utf-8', DEMO_HTML))
    .get('/demo/app.js', (res) => sendFile(res, 'text/javascript; charset=utf-8', DEMO_JS))
    .get('/demo/app.css', (res) => sendFile(res, 'text/css; charset=utf-8', DEMO_CSS))
    .post('/demo/token', (res, req) => {
      if (!isLocalBrowser(Buffer.from(res.getRemoteAddressAsText()).toString(), req)) {
        return refuseRequest(
          res,
          gatewayError('NOT_FOUND', 'the demo token is given only to a browser on this machine, not through a proxy'),
          'not_found',
        );
      }
      asyncHttp(log, res, async (aborted) => {
        const token = await devToken(demo.tokenUrl);
        if (!aborted()) sendJson(res, 200, token);
      });
    });
}

function sendFile(res: uWS.HttpResponse, type: string, body: string): void {
  res.cork(() => {
    res.writeHeader('content-type', type);
    res.writeHeader('content-security-policy', CSP);
    res.writeHeader('x-content-type-options', 'nosniff');
    res.writeHeader('referrer-policy', 'no-referrer');
    res.writeHeader('cache-control', 'no-store');
    res.end(body);
  });
}

/** A limited-scope token (openid transcribe) for the emulator's development client. */
async function devToken(tokenUrl: string): Promise<{ access_token: string; expires_in: number }> {
  const r = await fetch(tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'dev',
      client_secret: 'dev-secret',
      scope: 'openid transcribe',
    }),
    signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
  });
  if (!r.ok) throw new Error(`the emulator's token endpoint answered ${r.status}`);
  const { access_token, expires_in } = (await r.json()) as { access_token: string; expires_in: number };
  return { access_token, expires_in };
}
