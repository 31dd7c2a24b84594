// `npm run stream -- <file> [--streams]`: streams an audio file through the gateway at real-time
// pace and prints the events as they arrive. What a new user tries first, and an operator's smoke test.
// It resumes its session after a lost connection, as a client on hospital Wi-Fi should.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const USAGE = `usage: npm run stream -- <audio file> [options]
  --streams              use the ambient /streams API (default: /transcribe dictation)
  --gateway URL          gateway base (default ws://localhost:$PORT or ws://localhost:8080)
  --tenant NAME          tenant (default base)
  --token JWT            access token; default: fetch a development token from --auth
  --auth URL             auth server base for the development token (default http://127.0.0.1:$EMULATOR_PORT or :8081)
  --client-id ID         (default dev)   --client-secret S (default dev-secret)
  --format MIME          audioFormat to declare (default: from the file extension; none for unknown)
  --language CODE        primary language (default en)
  --fast                 send the whole file at once (the gateway paces it to real time)
A lost connection (any close but 1000 or a 4xxx answer, before the end message) is reconnected with
backoff; the gateway resumes the session (query resume=<random key>) and the file is resent from the
byte count it reports.`;

const FORMATS: Record<string, string> = {
  '.ogg': 'audio/ogg',
  '.opus': 'audio/ogg;codecs=opus',
  '.webm': 'audio/webm',
  '.mp3': 'audio/mpeg',
  '.flac': 'audio/flac',
  '.m4a': 'audio/mp4',
  '.mp4': 'audio/mp4',
  '.wav': 'audio/wav',
  '.pcm': 'audio/pcm;rate=16000;channels=1',
};

async function devToken(
  auth: string,
  tenant: string,
  clientId: string,
  secret: string,
  scope: string,
): Promise<string> {
  const res = await fetch(`${auth}/realms/${encodeURIComponent(tenant)}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret, scope }),
  });
  if (!res.ok) throw new Error(`token request failed: HTTP ${res.status}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Media duration in seconds, from ffprobe when it is installed (only used to pace sending). */
function durationOf(file: string): number | undefined {
  try {
    const out = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file], {
      encoding: 'utf8',
    });
    const d = Number.parseFloat(out);
    return Number.isFinite(d) && d > 0 ? d : undefined;
  } catch {
    return undefined;
  }
}

function describe(text: string): string {
  try {
    const m = JSON.parse(text) as Record<string, unknown> & { type: string };
    if (m.type === 'transcript' && !Array.isArray(m.data)) {
      const d = m.data as { text: string; start: number; end: number; isFinal: boolean };
      return `transcript ${d.isFinal ? 'final  ' : 'interim'} [${d.start.toFixed(2)}-${d.end.toFixed(2)}] ${d.text}`;
    }
    if (m.type === 'transcript' && Array.isArray(m.data)) {
      return (
        m.data as Array<{
          transcript: string;
          final: boolean;
          time: { start: number; end: number };
          participant?: { channel: number };
        }>
      )
        .map(
          (d) =>
            `transcript ${d.final ? 'final  ' : 'interim'} [${d.time.start.toFixed(2)}-${d.time.end.toFixed(2)}] ch${d.participant?.channel ?? 0} ${d.transcript}`,
        )
        .join('\n');
    }
    return text;
  } catch {
    return text;
  }
}

/** Reconnection after a lost connection: 0.5 s, doubled after each failed attempt, RECONNECT_ATTEMPTS in a
 * row (about 15 s in all, inside the gateway's default 30 s grace); the count starts over once a
 * connection is accepted, and MAX_RECONNECTS bounds a gateway that accepts and drops again and again. */
const RECONNECT_DELAY_MS = 500;
const RECONNECT_ATTEMPTS = 5;
const MAX_RECONNECTS = 20;

interface Run {
  url: string;
  configuration: object;
  audio: Buffer;
  /** seconds of media, to send at real time; undefined: all at once (--fast) */
  duration?: number;
  stamp(): string;
}

/** Streams `run.audio`, resuming the session after a lost connection with the same URL (and resume key). */
function stream(run: Run): void {
  let sessionId: string | undefined; // the session the gateway accepted, once it has
  let ended = false;
  let failures = 0;
  let reconnects = 0;
  function giveUp(why: string): never {
    console.error(`${run.stamp()} ${why}`);
    process.exit(1);
  }

  const connect = (): void => {
    const ws = new WebSocket(run.url);
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => giveUp(`gateway refused the connection: HTTP ${res.statusCode} ${body}`));
    });
    ws.on('error', (err) => console.error(`${run.stamp()} connection failed: ${err.message}`)); // 'close' follows
    ws.on('open', () => {
      console.log(`${run.stamp()} connected; config ${JSON.stringify(run.configuration)}`);
      ws.send(JSON.stringify({ type: 'config', configuration: run.configuration }));
    });
    ws.on('message', (data) => onMessage(ws, data.toString()));
    ws.on('close', (code, reason) => onClose(code, reason.toString()));
  };

  const onMessage = (ws: WebSocket, text: string): void => {
    console.log(`${run.stamp()} ${describe(text)}`);
    const m = parseObject(text);
    if (m?.type === 'ended' || m?.type === 'ENDED') ended = true;
    if (m?.type !== 'CONFIG_ACCEPTED') return;
    failures = 0;
    const from = startByte(m, run.audio.length, sessionId);
    if (typeof from === 'string') giveUp(from);
    if (m.resumed === true)
      console.log(
        `${run.stamp()} resumed session ${m.sessionId}; the gateway has ${from} of ${run.audio.length} bytes, sending the rest`,
      );
    sessionId = String(m.sessionId);
    void sendFrom(ws, run, from);
  };

  const onClose = (code: number, reason: string): void => {
    console.log(`${run.stamp()} closed ${code} ${reason}`);
    // 4xxx is the gateway's answer about this stream (config denied, audio invalid, replaced...): it would give it again.
    if (code === 1000 || ended || (code >= 4000 && code < 5000)) process.exit(code === 1000 ? 0 : 1);
    if (failures >= RECONNECT_ATTEMPTS || reconnects >= MAX_RECONNECTS)
      giveUp(`giving up after ${reconnects} reconnections`);
    const wait = RECONNECT_DELAY_MS * 2 ** failures;
    failures++;
    reconnects++;
    console.log(
      `${run.stamp()} connection lost; reconnecting in ${wait / 1000} s (attempt ${failures} of ${RECONNECT_ATTEMPTS})`,
    );
    setTimeout(connect, wait);
  };

  connect();
}

/** Where to send from after a CONFIG_ACCEPTED: 0 for a first session, the gateway's byte count for a
 * resumed one; a string says why the run cannot go on (a new session after one was lost would repeat
 * the transcript and its credits). */
function startByte(accepted: Record<string, unknown>, length: number, earlier: string | undefined): number | string {
  if (accepted.resumed !== true) {
    return earlier === undefined
      ? 0
      : `the gateway started a new session instead of resuming ${earlier} (it ended, or its grace period passed); the transcript above is incomplete`;
  }
  const n = accepted.audioBytes;
  if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= length) return n;
  return `resumed, but audioBytes ${JSON.stringify(n)?.slice(0, 40)} is not a byte count of this file`;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Sends the audio from byte `from`, then `end`; stops when this socket is gone (the next one resends). */
async function sendFrom(ws: WebSocket, run: Run, from: number): Promise<void> {
  const chunk = run.duration ? Math.max(1, Math.round(run.audio.length / run.duration / 4)) : 32_000; // about 250 ms a chunk
  for (let off = from; off < run.audio.length; off += chunk) {
    if (ws.readyState !== WebSocket.OPEN) return;
    ws.send(run.audio.subarray(off, off + chunk));
    if (run.duration) await new Promise((r) => setTimeout(r, 250));
  }
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'end' }));
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      streams: { type: 'boolean', default: false },
      gateway: { type: 'string', default: `ws://localhost:${process.env.PORT ?? 8080}` },
      tenant: { type: 'string', default: 'base' },
      token: { type: 'string' },
      auth: { type: 'string', default: `http://127.0.0.1:${process.env.EMULATOR_PORT ?? 8081}` },
      'client-id': { type: 'string', default: 'dev' },
      'client-secret': { type: 'string', default: 'dev-secret' },
      format: { type: 'string' },
      language: { type: 'string', default: 'en' },
      fast: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  const file = positionals[0];
  if (!file || values.help) {
    console.log(USAGE);
    process.exit(file ? 0 : 2);
  }
  const audio = readFileSync(file);
  const scope = values.streams ? 'openid streams' : 'openid transcribe';
  const token =
    values.token ??
    (await devToken(values.auth!, values.tenant!, values['client-id']!, values['client-secret']!, scope));
  const path = values.streams ? `/audio-bridge/v2/interactions/${randomUUID()}/streams` : '/audio-bridge/v2/transcribe';
  // The resume key is chosen once: every reconnection uses the same URL and takes the same session over.
  const resume = randomBytes(18).toString('base64url');
  const query = new URLSearchParams({ 'tenant-name': values.tenant!, token: `Bearer ${token}`, resume });
  const audioFormat = values.format ?? FORMATS[extname(file).toLowerCase()];
  const configuration = values.streams
    ? {
        transcription: { primaryLanguage: values.language, isMultichannel: false },
        mode: { type: 'facts', outputLocale: values.language },
        ...(audioFormat ? { audioFormat } : {}),
      }
    : { primaryLanguage: values.language, interimResults: false, ...(audioFormat ? { audioFormat } : {}) };

  const started = Date.now();
  console.log(`streaming ${file} to ${values.gateway}${path}`);
  stream({
    url: `${values.gateway}${path}?${query}`,
    configuration,
    audio,
    duration: values.fast ? undefined : durationOf(file),
    stamp: () => `${((Date.now() - started) / 1000).toFixed(2).padStart(7)}s`,
  });
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
