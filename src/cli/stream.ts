// `npm run stream -- <file> [--streams]`: streams an audio file through the gateway at real-time
// pace and prints the events as they arrive. What a new user tries first, and an operator's smoke test.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
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
  --fast                 send the whole file at once (the gateway paces it to real time)`;

const FORMATS: Record<string, string> = {
  '.ogg': 'audio/ogg', '.opus': 'audio/ogg;codecs=opus', '.webm': 'audio/webm', '.mp3': 'audio/mpeg', '.flac': 'audio/flac',
  '.m4a': 'audio/mp4', '.mp4': 'audio/mp4', '.wav': 'audio/wav', '.pcm': 'audio/pcm;rate=16000;channels=1',
};

async function devToken(auth: string, tenant: string, clientId: string, secret: string, scope: string): Promise<string> {
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
    const out = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file], { encoding: 'utf8' });
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
      return (m.data as Array<{ transcript: string; final: boolean; time: { start: number; end: number }; participant?: { channel: number } }>)
        .map((d) => `transcript ${d.final ? 'final  ' : 'interim'} [${d.time.start.toFixed(2)}-${d.time.end.toFixed(2)}] ch${d.participant?.channel ?? 0} ${d.transcript}`)
        .join('\n');
    }
    return text;
  } catch {
    return text;
  }
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
  const token = values.token ?? (await devToken(values.auth!, values.tenant!, values['client-id']!, values['client-secret']!, scope));
  const path = values.streams ? `/audio-bridge/v2/interactions/${randomUUID()}/streams` : '/audio-bridge/v2/transcribe';
  const query = new URLSearchParams({ 'tenant-name': values.tenant!, token: `Bearer ${token}` });
  const audioFormat = values.format ?? FORMATS[extname(file).toLowerCase()];
  const configuration = values.streams
    ? { transcription: { primaryLanguage: values.language, isMultichannel: false }, mode: { type: 'facts', outputLocale: values.language }, ...(audioFormat ? { audioFormat } : {}) }
    : { primaryLanguage: values.language, interimResults: false, ...(audioFormat ? { audioFormat } : {}) };

  const ws = new WebSocket(`${values.gateway}${path}?${query}`);
  const started = Date.now();
  const stamp = () => `${((Date.now() - started) / 1000).toFixed(2).padStart(7)}s`;
  ws.on('unexpected-response', (_req, res) => {
    let body = '';
    res.on('data', (c: Buffer) => (body += c.toString()));
    res.on('end', () => {
      console.error(`gateway refused the connection: HTTP ${res.statusCode} ${body}`);
      process.exit(1);
    });
  });
  ws.on('error', (err) => {
    console.error(`connection failed: ${err.message}`);
    process.exit(1);
  });
  ws.on('open', () => {
    console.log(`${stamp()} connected to ${values.gateway}${path}; config ${JSON.stringify(configuration)}`);
    ws.send(JSON.stringify({ type: 'config', configuration }));
  });
  ws.on('close', (code, reason) => {
    console.log(`${stamp()} closed ${code} ${reason.toString()}`);
    process.exit(code === 1000 ? 0 : 1);
  });
  ws.on('message', async (data) => {
    const text = data.toString();
    console.log(`${stamp()} ${describe(text)}`);
    if (!text.includes('"CONFIG_ACCEPTED"')) return;
    const duration = values.fast ? undefined : durationOf(file);
    const chunk = duration ? Math.max(1, Math.round(audio.length / duration / 4)) : 32_000; // about 250 ms a chunk
    for (let off = 0; off < audio.length; off += chunk) {
      ws.send(audio.subarray(off, off + chunk));
      if (duration) await new Promise((r) => setTimeout(r, 250));
    }
    ws.send(JSON.stringify({ type: 'end' }));
  });
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
