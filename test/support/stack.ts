// Test support: a real gateway (uWS, its client and admin ports) and the upstream emulator on ephemeral loopback ports,
// and a WebSocket client that records what a user would see.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config.js';
import type { Emulator } from '../../src/emulator/index.js';
import { startGateway, type Gateway } from '../../src/gateway.js';

export interface Stack {
  gateway: Gateway;
  emulator: Emulator;
  /** ws://127.0.0.1:PORT */
  base: string;
  token(scope?: string, tenant?: string): Promise<string>;
  /** Opens a socket with the token in the query (as browsers do). */
  connect(
    endpoint: 'transcribe' | 'streams',
    o?: { token?: string; tenant?: string; interactionId?: string },
  ): Promise<TestClient>;
  close(): Promise<void>;
}

/** With `o.emulator`, the gateway talks to that emulator (started by the test with its own options). */
export async function startStack(env: Record<string, string> = {}, o: { emulator?: Emulator } = {}): Promise<Stack> {
  const external = o.emulator ? { UPSTREAM_URL: o.emulator.wsBase, AUTH_URL: o.emulator.authBase } : {};
  const config = loadConfig({
    ...external,
    PORT: '0',
    ADMIN_PORT: '0',
    HOST: '127.0.0.1',
    EMULATOR_PORT: '0',
    USAGE_JOURNAL_DIR: mkdtempSync(join(tmpdir(), 'sgw-journal-')),
    // The audit trail to a file of its own: on stdout (the default) it would fill the test output.
    AUDIT_LOG_FILE: join(mkdtempSync(join(tmpdir(), 'sgw-audit-')), 'audit.jsonl'),
    DRAIN_SECONDS: '5',
    ...env,
  });
  const gateway = await startGateway(config);
  const emulator = o.emulator ?? gateway.emulator!;
  const base = `ws://127.0.0.1:${gateway.server.port}`;
  const stack: Stack = {
    gateway,
    emulator,
    base,
    token: (scope = 'openid transcribe streams', tenant = 'base') => emulator.issueToken({ tenant, scope }),
    async connect(endpoint, o = {}) {
      const token =
        o.token ?? (await stack.token(endpoint === 'transcribe' ? 'openid transcribe' : 'openid streams', o.tenant));
      const q = new URLSearchParams({ 'tenant-name': o.tenant ?? 'base', token: `Bearer ${token}` });
      return openClient(`${base}${endpointPath(endpoint, o.interactionId)}?${q}`);
    },
    close: async () => {
      await gateway.stop();
      await o.emulator?.close();
    },
  };
  return stack;
}

/** The gateway's path for an endpoint (/streams under an interaction). */
export function endpointPath(
  endpoint: 'transcribe' | 'streams',
  interactionId = '0b0c5f3e-7a7e-4a7a-9d3c-2f6f1f0c9a11',
): string {
  return endpoint === 'transcribe'
    ? '/audio-bridge/v2/transcribe'
    : `/audio-bridge/v2/interactions/${interactionId}/streams`;
}

/** The /transcribe URL on `base` (ws://host:port) of a resumable session, as browsers open it: the
 *  tenant, the resume key and the bearer token in the query. */
export function resumeUrl(base: string, tenant: string, key: string, token: string): string {
  return `${base}${endpointPath('transcribe')}?tenant-name=${tenant}&resume=${key}&token=${encodeURIComponent(`Bearer ${token}`)}`;
}

export interface TestClient {
  ws: WebSocket;
  messages: Array<Record<string, any>>;
  /** Resolves with the first message (from the start) of this type not yet taken by next(). */
  next(type: string, timeoutMs?: number): Promise<Record<string, any>>;
  closed: Promise<{ code: number; reason: string }>;
  sendJson(m: unknown): void;
  send(data: Buffer | string): void;
  types(): string[];
}

export function openClient(url: string, protocols?: string[], headers?: Record<string, string>): Promise<TestClient> {
  const ws = new WebSocket(url, protocols, { headers, perMessageDeflate: false });
  const messages: Array<Record<string, any>> = [];
  const waiters: Array<() => void> = [];
  const taken = new Set<number>();
  let closeSeen = '';
  ws.on('message', (data) => {
    messages.push(JSON.parse(data.toString()));
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code, reason) => {
      closeSeen = ` (${code} ${reason.toString().slice(0, 100)})`;
      resolve({ code, reason: reason.toString() });
      for (const w of waiters.splice(0)) w();
    });
  });
  const client: TestClient = {
    ws,
    messages,
    closed,
    sendJson: (m) => ws.send(JSON.stringify(m)),
    send: (d) => ws.send(d),
    types: () => messages.map((m) => m.type),
    next(type, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no "${type}" message within ${timeoutMs} ms; got ${JSON.stringify(client.types())}`)),
          timeoutMs,
        );
        const check = () => {
          const i = messages.findIndex((m, k) => m.type === type && !taken.has(k));
          if (i >= 0) {
            taken.add(i);
            clearTimeout(timer);
            return resolve(messages[i]);
          }
          if (ws.readyState === WebSocket.CLOSED) {
            clearTimeout(timer);
            return reject(
              new Error(`socket closed${closeSeen} before "${type}"; got ${JSON.stringify(client.types())}`),
            );
          }
          waiters.push(check);
        };
        check();
      });
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () =>
        reject(
          Object.assign(new Error(`HTTP ${res.statusCode} ${body.slice(0, 300)}`), { status: res.statusCode, body }),
        ),
      );
    });
    ws.once('error', reject);
  });
}

/** The configuration with the least in it that `endpoint` accepts: English, transcription only; with
 *  `audioFormat` when one is given. */
export function englishConfiguration(
  endpoint: 'transcribe' | 'streams',
  audioFormat?: string,
): Record<string, unknown> {
  const c =
    endpoint === 'transcribe'
      ? { primaryLanguage: 'en' }
      : { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' } };
  return audioFormat === undefined ? c : { ...c, audioFormat };
}

/** Sends `configuration` as the client's config; resolves with the CONFIG_ACCEPTED it is answered with. */
export async function configured(c: TestClient, configuration: object): Promise<Record<string, any>> {
  c.sendJson({ type: 'config', configuration });
  return c.next('CONFIG_ACCEPTED');
}

/** A client on `url` that sent `configuration`, and the CONFIG_ACCEPTED it got. */
export async function openConfigured(
  url: string,
  configuration: object,
): Promise<{ client: TestClient; accepted: Record<string, any> }> {
  const client = await openClient(url);
  return { client, accepted: await configured(client, configuration) };
}

/** The HTTP answer to an upgrade the gateway refuses. */
export async function refusal(
  url: string,
  protocols?: string[],
  headers?: Record<string, string>,
): Promise<{ status: number; body: any }> {
  try {
    const c = await openClient(url, protocols, headers);
    c.ws.close();
    throw new Error('the upgrade was accepted');
  } catch (err) {
    const e = err as { status?: number; body?: string };
    if (!e.status) throw err;
    return { status: e.status, body: JSON.parse(e.body ?? '{}') };
  }
}
