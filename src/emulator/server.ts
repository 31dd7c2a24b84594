// Starts the emulator: one node:http server for the auth routes, with `ws` handling socket upgrades.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { handleAuthRequest, type AuthContext } from './auth-http.js';
import { KeyStore } from './keys.js';
import { SessionRecord } from './session-record.js';
import { SessionWindow } from './session-window.js';
import { UpstreamSession, type SessionDeps } from './session.js';
import { issueToken } from './tokens.js';
import { TranscriptFaultBoard, type TranscriptFaultName } from './transcript-faults.js';
import { checkUpgrade, type UpgradeVerdict } from './upgrade.js';
import {
  defaultFaults,
  type Emulator,
  type EmulatorOptions,
  type FaultSwitches,
  type TokenRequestRecord,
} from './types.js';

// node:http as its CommonJS object: an ESM import of it makes Node evaluate its lazy exports, which
// load the bundled undici (about 14 MB of RSS in a gateway that embeds the emulator).
const { createServer, STATUS_CODES } = process.getBuiltinModule('node:http');

function refuse(socket: Duplex, status: number, reason: string): void {
  const body = JSON.stringify({ error: STATUS_CODES[status] ?? 'error', reason });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Makes `act` run each time the switch is set, so it reaches the sessions already live. A value
 * `act` refuses (throws) is not kept. */
function onSet<K extends keyof FaultSwitches>(
  faults: FaultSwitches,
  key: K,
  act: (value: FaultSwitches[K]) => void,
): void {
  let value = faults[key];
  Object.defineProperty(faults, key, {
    enumerable: true,
    get: () => value,
    set: (v: FaultSwitches[K]) => {
      act(v);
      value = v;
    },
  });
}

/** What every emulated upstream session runs with. */
function sessionDeps(
  o: EmulatorOptions,
  faults: FaultSwitches,
  transcriptFaults: TranscriptFaultBoard,
  violations: string[],
  now: () => number,
): SessionDeps {
  return {
    faults,
    transcriptFaults,
    violations,
    now,
    creditsPerSecond: o.creditsPerSecond ?? 0.1,
    configTimeoutMs: o.configTimeoutMs ?? 10_000,
    streamsMaxAgeMs: o.streamsMaxAgeMs ?? 2 * 60 * 60 * 1000,
  };
}

const TRANSCRIPT_FAULTS: TranscriptFaultName[] = ['stopTranscribing', 'interimsOnly', 'dropFinals'];

/** Faults switched on while sessions are live reach them at once, not only the next ones. */
function applyToLive(faults: FaultSwitches, board: TranscriptFaultBoard, live: Set<UpstreamSession>): void {
  onSet(faults, 'halfOpen', (on) => live.forEach((s) => s.setHalfOpen(on)));
  onSet(faults, 'goingAway', (code) => {
    if (code !== null) live.forEach((s) => s.goAway(code));
  });
  for (const name of TRANSCRIPT_FAULTS) {
    const transcribing = () => [...live].flatMap((s) => s.transcribing ?? []);
    onSet(faults, name, (f) => board.set(name, f as Parameters<TranscriptFaultBoard['set']>[1], transcribing()));
  }
}

/** The fault switches (reaching live sessions as they are set) and the transcript faults' board. */
function faultControls(live: Set<UpstreamSession>) {
  const faults = defaultFaults();
  const board = new TranscriptFaultBoard();
  applyToLive(faults, board, live);
  const reset = () => {
    Object.assign(faults, defaultFaults());
    board.resetCounts();
  };
  return { faults, board, reset };
}

/** An accepted upstream socket: its record in the window, and its session, faults already on applied. */
function startSession(
  ws: WebSocket,
  v: Extract<UpgradeVerdict, { ok: true }>,
  n: number,
  window: SessionWindow,
  deps: SessionDeps,
): UpstreamSession {
  const record = new SessionRecord(v.endpoint, v.tenant, v.token, window);
  record.interactionId = v.interactionId;
  window.add(record);
  const session = new UpstreamSession(ws, record, `${v.endpoint} session ${n}`, deps);
  if (deps.faults.halfOpen) session.setHalfOpen(true);
  if (deps.faults.goingAway !== null) session.goAway(deps.faults.goingAway);
  return session;
}

export async function startEmulator(o: EmulatorOptions = {}): Promise<Emulator> {
  const host = o.host ?? '127.0.0.1';
  const now = o.now ?? Date.now;
  const clients = o.clients ?? { base: [{ clientId: 'dev', clientSecret: 'dev-secret' }] };
  const keys = new KeyStore([...Object.keys(clients), ...(o.realms ?? [])]);
  const violations: string[] = [];
  const tokenRequests: TokenRequestRecord[] = [];
  const live = new Set<UpstreamSession>();
  const { faults, board: transcriptFaults, reset: resetFaults } = faultControls(live);
  const window = new SessionWindow(o.maxSessionRecords ?? 200, o.maxAudioBytes ?? 32 * 1024 * 1024);
  const sessionOptions = sessionDeps(o, faults, transcriptFaults, violations, now);
  let started = 0;
  let authBase = '';
  const auth: AuthContext = {
    keys,
    authBase: () => authBase,
    now,
    clients,
    tokenRequests,
    jwksRequests: 0,
    tokenLifetimeSeconds: o.tokenLifetimeSeconds ?? 300,
  };

  const http: Server = createServer((req, res) => {
    handleAuthRequest(auth, req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  // Frames above the upstream's 64000-byte limit are accepted so they can be recorded as violations.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 * 1024 });

  http.on('upgrade', (req, socket, head) => {
    socket.on('error', () => undefined);
    if (faults.rejectUpgradeStatus !== null)
      return refuse(socket, faults.rejectUpgradeStatus, 'emulator: rejectUpgradeStatus');
    checkUpgrade(req, keys, authBase, now()).then(
      (v) => {
        if (!v.ok) return refuse(socket, v.status, v.reason);
        wss.handleUpgrade(req, socket, head, (ws) => {
          const session = startSession(ws, v, ++started, window, sessionOptions);
          live.add(session);
          ws.on('close', () => live.delete(session));
        });
      },
      () => refuse(socket, 500, 'emulator error'),
    );
  });

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port ?? 0, host, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  authBase = `http://${host}:${port}`;

  const dropAll = (code?: number) => {
    for (const s of live) s.terminate(code);
    live.clear();
  };

  return {
    port,
    wsBase: `ws://${host}:${port}/audio-bridge/v2`,
    authBase,
    faults,
    faultCounts: transcriptFaults.counts,
    resetFaults,
    sessions: window.records,
    violations,
    tokenRequests,
    get jwksRequests() {
      return auth.jwksRequests;
    },
    realms: () => keys.names(),
    issueToken: (t) => issueToken(keys, authBase, now(), t),
    rotateKeys: (tenant, r) => keys.rotate(tenant, r?.dropOld ?? false),
    dropAllSessions: dropAll,
    close: async () => {
      dropAll();
      wss.close();
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      http.closeAllConnections(); // idle keep-alive connections would hold close() open
      await closed;
    },
  };
}
