// Test support: the vendor SDK (@corti/sdk 1.0.0), unmodified, as a client of the gateway.
//
// What the SDK does in proxy mode (read from its dist/ and .d.ts files, version 1.0.0):
// - `CortiWebSocketProxyClient.transcribe.connect({ proxy, configuration })` and `.stream.connect(...)`
//   open a ReconnectingWebSocket (the `ws` package in Node) to `proxy.url` exactly as given: no path is
//   added. `proxy.protocols` given as a record {name: value} becomes the subprotocol list
//   [name, encodeURIComponent(value), ...] (so Authorization, Bearer%20<jwt>, Tenant-Name, T); it is
//   computed once at connect() and reused on every attempt. `proxy.queryParameters` is kept by
//   reference and turned into `?k=v` on every attempt (empty: no query). permessage-deflate is offered.
// - connect() with a configuration and the default awaitConfiguration sends {type:"config"} on open and
//   resolves only at CONFIG_ACCEPTED (or CONFIG_ALREADY_RECEIVED); it rejects and closes on
//   CONFIG_DENIED/CONFIG_TIMEOUT/CONFIG_MISSING (/streams: CONFIG_NOT_PROVIDED instead of TIMEOUT), on
//   a socket error, or on the end message. Those messages are not surfaced to on('message'). After it
//   resolves, an 'open' listener sends the same config again on every later open; the answers to those
//   (CONFIG_ACCEPTED, CONFIG_DENIED) are plain messages to on('message'): a denial does not stop it, and
//   a close other than 1000 after it makes it reconnect again. (With awaitConfiguration false it sends
//   the config on every open itself and closes with 1000 on a denial, an error message or the end message.)
// - Reconnection: any close other than 1000 reconnects to the same URL and query, after a delay of
//   0 for the first attempt, then d × 1.3^(n-1) capped at 10 s, where d is drawn once per process
//   (1–5 s, at module load) and n resets to 0 after 5 s up. At most 30 attempts (reconnectAttempts).
//   An attempt not open within 4 s counts as an error. Any 'error' event (a refused or failed
//   handshake: HTTP 401/503, a missing subprotocol answer, connection refused, that timeout) closes it
//   as code 1000, so it never retries after one. A dropped TCP connection (no close frame) is 1006.
// - While not open, `socket.send(data)` queues (unbounded); on open the queue is sent first, then the
//   'open' listeners run, so on a reconnect the server gets the queued audio, then the config, without
//   waiting for an answer. `sendAudio`/`sendEnd`/`sendFlush`/`sendConfiguration` throw "Socket is not
//   open." while disconnected, so audio that must survive a drop goes through `send`.
// - Events: on('open'), on('message', every frame parsed as JSON), on('close', {code}),
//   on('error', Error). A message matching none of the API's types is still surfaced, after a
//   console.warn "Failed to validate." (/transcribe: anything but usage, flushed, delta_usage, ended,
//   error, transcript, command, or a config status with a string sessionId; /streams: any object whose
//   `type` is a string passes as a config status, so it warns on almost nothing). End message:
//   "ended" on /transcribe, "ENDED" on /streams; in this mode the SDK does not close by itself on it.
// - socket.close() closes with 1000 and stops reconnecting.
import { randomBytes } from 'node:crypto';
import { CortiWebSocketProxyClient } from '@corti/sdk';
import type { Endpoint } from '../../src/protocol/endpoint.js';
import { endpointPath } from './stack.js';
import { delay } from './wait.js';

export interface SdkStreamOptions {
  /** The gateway (or a proxy in front of it): ws://127.0.0.1:PORT */
  base: string;
  tenant: string;
  token: string;
  endpoint: Endpoint;
  configuration: Record<string, unknown>;
  /** Audio, one piece every pieceMs (default 250 ms, as a browser's MediaRecorder timeslice). */
  pieces: Buffer[];
  pieceMs?: number;
  /** Sent as proxy.queryParameters.resume on every attempt. */
  resumeKey?: string;
  interactionId?: string;
  /** Called after piece i went to the SDK (e.g. to drop the network mid-stream). */
  onPiece?: (i: number) => void;
  /** How long to wait for the end message after the last piece (default 30 s). */
  endTimeoutMs?: number;
}

/** Everything the SDK surfaced during one run, in order. */
export interface SdkRun {
  messages: Array<Record<string, any>>;
  errors: string[];
  closeCodes: number[];
  /** Opens after connect() resolved, i.e. reconnections (the first open happens inside connect()). */
  reopens: number;
  /** console.warn output while the run was active (the SDK warns on messages it does not know). */
  warnings: string[];
}

const CONFIG_STATUS = ['CONFIG_ACCEPTED', 'CONFIG_DENIED', 'CONFIG_ALREADY_RECEIVED', 'CONFIG_MISSING'];
/** The message types the SDK's API declares per endpoint (its warning alone misses most unknown ones on /streams). */
export const SDK_MESSAGE_TYPES: Record<Endpoint, readonly string[]> = {
  transcribe: [
    'usage',
    'flushed',
    'delta_usage',
    'ended',
    'error',
    'transcript',
    'command',
    'CONFIG_TIMEOUT',
    ...CONFIG_STATUS,
  ],
  streams: [
    'transcript',
    'facts',
    'flushed',
    'delta_usage',
    'ENDED',
    'usage',
    'error',
    'CONFIG_NOT_PROVIDED',
    ...CONFIG_STATUS,
  ],
};

/** A key as the resume protocol asks: 128 random bits, base64url (22 characters). */
export const newResumeKey = () => randomBytes(16).toString('base64url');

/** Streams `pieces` through the SDK at real time, sends end, resolves at the end message (then closes 1000). */
export async function streamWithSdk(o: SdkStreamOptions): Promise<SdkRun> {
  const run: SdkRun = { messages: [], errors: [], closeCodes: [], reopens: 0, warnings: [] };
  const stopWarnings = captureWarnings(run.warnings);
  try {
    const client =
      o.endpoint === 'transcribe' ? CortiWebSocketProxyClient.transcribe : CortiWebSocketProxyClient.stream;
    const proxy: { url: string; protocols: Record<string, string>; queryParameters: Record<string, string> } = {
      url: `${o.base}${endpointPath(o.endpoint, o.interactionId)}`,
      protocols: { Authorization: `Bearer ${o.token}`, 'Tenant-Name': o.tenant },
      queryParameters: o.resumeKey ? { resume: o.resumeKey } : {},
    };
    // The SDK's config types lag the service (no audioFormat); it passes unknown keys through.
    const socket = await client.connect({ proxy, configuration: o.configuration as never });
    try {
      await play(socket, o, run);
    } finally {
      socket.close();
    }
    return run;
  } finally {
    stopWarnings();
  }
}

/** What both the SDK's sockets (/transcribe and /streams) offer, as this helper uses them. */
interface SdkSocket {
  on(event: 'open' | 'message' | 'close' | 'error', handler: (arg: any) => void): void;
  send(data: Buffer): void;
  sendEnd(m: { type: 'end' }): void;
  waitForOpen(): Promise<unknown>;
  close(): void;
}

async function play(socket: SdkSocket, o: SdkStreamOptions, run: SdkRun): Promise<void> {
  const endType = o.endpoint === 'transcribe' ? 'ended' : 'ENDED';
  const ended = new Promise<void>((resolve) => {
    socket.on('message', (m) => {
      run.messages.push(m as Record<string, any>);
      if (m.type === endType) resolve();
    });
  });
  socket.on('open', () => run.reopens++);
  socket.on('close', (e) => run.closeCodes.push(e.code));
  socket.on('error', (e) => run.errors.push(e.message));
  for (const [i, piece] of o.pieces.entries()) {
    socket.send(piece); // queued by the SDK while it reconnects
    o.onPiece?.(i);
    await delay(o.pieceMs ?? 250);
  }
  await socket.waitForOpen();
  socket.sendEnd({ type: 'end' });
  await within(
    ended,
    o.endTimeoutMs ?? 30_000,
    () => `no "${endType}" from the SDK; saw ${JSON.stringify(run).slice(-2000)}`,
  );
}

function within<T>(p: Promise<T>, ms: number, why: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(why())), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

// The SDK warns through console.warn, process-wide: every active run hears every warning.
const sinks = new Set<string[]>();
const originalWarn = console.warn;

function captureWarnings(into: string[]): () => void {
  sinks.add(into);
  console.warn = (...args: unknown[]) => {
    for (const s of sinks) s.push(args.map(String).join(' '));
    originalWarn(...args);
  };
  return () => {
    sinks.delete(into);
    if (sinks.size === 0) console.warn = originalWarn;
  };
}
