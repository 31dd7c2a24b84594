// Test client for the emulator's sockets: collects every server message in order and lets a test
// wait for a message, for the close, or for a refused upgrade.
import { WebSocket } from 'ws';

export interface Client {
  ws: WebSocket;
  messages: any[];
  /** Resolves with the first message (already received or future) matching `pred`. */
  next(pred: (m: any) => boolean): Promise<any>;
  closed: Promise<{ code: number }>;
  sendJson(m: unknown): void;
}

export function connect(url: string, headers?: Record<string, string>): Promise<Client> {
  const ws = new WebSocket(url, { headers });
  const messages: any[] = [];
  const waiters: Array<{ pred: (m: any) => boolean; resolve: (m: any) => void }> = [];
  ws.on('message', (data, isBinary) => {
    const m = isBinary ? { binary: data } : JSON.parse(String(data));
    messages.push(m);
    for (const w of [...waiters])
      if (w.pred(m)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
  });
  const closed = new Promise<{ code: number }>((resolve) => ws.on('close', (code) => resolve({ code })));
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({
        ws,
        messages,
        closed,
        next: (pred) => {
          const hit = messages.find(pred);
          return hit ? Promise.resolve(hit) : new Promise((r) => waiters.push({ pred, resolve: r }));
        },
        sendJson: (m) => ws.send(JSON.stringify(m)),
      }),
    );
    ws.once('unexpected-response', (_req, res) =>
      reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })),
    );
    ws.once('error', reject);
  });
}

/** The HTTP status of a refused upgrade (throws if the upgrade succeeds). */
export async function refusedStatus(url: string, headers?: Record<string, string>): Promise<number> {
  try {
    const c = await connect(url, headers);
    c.ws.terminate();
  } catch (e) {
    const status = (e as { status?: number }).status;
    if (status) return status;
    throw e;
  }
  throw new Error('upgrade was accepted');
}

export function transcribeUrl(wsBase: string, tenant: string, token: string): string {
  return `${wsBase}/transcribe?tenant-name=${tenant}&token=${encodeURIComponent('Bearer ' + token)}`;
}

export function streamsUrl(
  wsBase: string,
  tenant: string,
  token: string,
  id = '3f1c2b1e-8f4a-4c7e-9a7e-2b1d3c4e5f60',
): string {
  return `${wsBase}/interactions/${id}/streams?tenant-name=${tenant}&token=${encodeURIComponent('Bearer ' + token)}&environment=eu`;
}

/** A /transcribe session opened on `em` for tenant `base` and configured (CONFIG_ACCEPTED received). */
export async function openTranscribe(
  em: { wsBase: string; issueToken(o: { tenant: string }): Promise<string> },
  configuration: Record<string, unknown> = {},
): Promise<Client> {
  const c = await connect(transcribeUrl(em.wsBase, 'base', await em.issueToken({ tenant: 'base' })));
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', ...configuration } });
  await c.next((m) => m.type === 'CONFIG_ACCEPTED');
  return c;
}

/** Sends every frame then `end`, and waits for the close: the session's whole answer is in `c.messages`. */
export async function sendAllAndEnd(c: Client, frames: Buffer[]): Promise<void> {
  for (const f of frames) c.ws.send(f);
  c.sendJson({ type: 'end' });
  await c.closed;
}
