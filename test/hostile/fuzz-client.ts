// The attacker of test/hostile/fuzz.test.ts, in a process of its own (attackers are other
// machines: their CPU must not slow the gateway's event loop, only compete for cores). Sends
// CLIENTS × MESSAGES hostile messages and frames with valid tokens, reconnecting whenever the
// gateway closes a socket, then prints how many it sent as JSON on stdout.
//   FUZZ_BASE=ws://127.0.0.1:PORT FUZZ_TOKEN_T=<jwt> FUZZ_TOKEN_S=<jwt> FUZZ_SEED=n node --import tsx test/hostile/fuzz-client.ts
import { fixture, prng } from '../support/fixtures.js';
import { openClient, type TestClient } from '../support/stack.js';

const env = (name: string) => process.env[name] ?? '';
const SEED = Number(env('FUZZ_SEED'));
const CLIENTS = Number(env('FUZZ_CLIENTS') || 48);
const MESSAGES = Number(env('FUZZ_MESSAGES') || 70);

function url(endpoint: 'transcribe' | 'streams'): string {
  const path =
    endpoint === 'transcribe'
      ? '/audio-bridge/v2/transcribe'
      : '/audio-bridge/v2/interactions/0b0c5f3e-7a7e-4a7a-9d3c-2f6f1f0c9a11/streams';
  const token = endpoint === 'transcribe' ? env('FUZZ_TOKEN_T') : env('FUZZ_TOKEN_S');
  return `${env('FUZZ_BASE')}${path}?${new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` })}`;
}

const fixtures = [
  'dictation.ogg',
  'dictation.webm',
  'dictation.m4a',
  'dictation-16k.wav',
  'dictation.mp3',
  'dictation.flac',
].map(fixture);
const ogg = fixtures[0];

type Rnd = ReturnType<typeof prng>;
const pick = <T>(r: Rnd, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rnd, n: number) => Math.floor(r() * n);

const validConfigs = [
  { primaryLanguage: 'en' },
  { primaryLanguage: 'en', interimResults: true, audioFormat: 'audio/ogg' },
  {
    primaryLanguage: 'da',
    commands: [{ id: 'next', phrases: ['next section'] }],
    audioFormat: 'audio/webm;codecs=opus',
  },
  { primaryLanguage: 'en', audioFormat: 'audio/pcm;rate=16000;channels=1' },
  { primaryLanguage: 'en', audioFormat: 'audio/wav' },
];

function randomValue(r: Rnd, depth = 0): unknown {
  switch (int(r, depth > 3 ? 5 : 8)) {
    case 0:
      return r() * 1e6 - 5e5;
    case 1:
      return r() < 0.5;
    case 2:
      return null;
    case 3:
      return 'x'.repeat(int(r, 3) === 0 ? int(r, 300_000) : int(r, 60));
    case 4:
      return String.fromCharCode(...Array.from({ length: int(r, 40) }, () => int(r, 0xd7ff)));
    case 5:
      return Array.from({ length: int(r, 5) }, () => randomValue(r, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: int(r, 5) }, () => [
          pick(r, ['primaryLanguage', 'audioFormat', 'commands', 'type', 'configuration', 'k']),
          randomValue(r, depth + 1),
        ]),
      );
  }
}

function deepNest(r: Rnd): string {
  const n = 100 + int(r, 20_000);
  return `{"type":"config","configuration":{"primaryLanguage":"en","x":${'['.repeat(n)}${']'.repeat(n)}}}`;
}

/** One hostile message: text (valid, mutated, malformed, huge, deep) or binary (garbage, fixture pieces, mutated). */
function hostileMessage(r: Rnd): string | Buffer {
  switch (int(r, 14)) {
    case 0:
      return JSON.stringify({ type: 'config', configuration: pick(r, validConfigs) });
    case 1:
      return JSON.stringify({ type: 'config', configuration: randomValue(r) });
    case 2:
      return JSON.stringify({ type: pick(r, ['flush', 'end', 'config', 'CONFIG_ACCEPTED', '', 'x'.repeat(500)]) });
    case 3:
      return JSON.stringify(randomValue(r));
    case 4:
      return JSON.stringify({ type: 'config', configuration: pick(r, validConfigs) }).slice(0, int(r, 40)); // truncated JSON
    case 5:
      return deepNest(r);
    case 6:
      return 'x'.repeat(int(r, 2) ? 600_000 : 20); // over the text limit, or noise
    case 7:
      return Buffer.alloc(0);
    case 8:
      return Buffer.from(Array.from({ length: 1 + int(r, 300) }, () => int(r, 256))); // garbage
    case 9: {
      const f = pick(r, fixtures);
      const at = int(r, f.length);
      return f.subarray(at, at + 1 + int(r, 40_000));
    }
    case 10: {
      const f = Buffer.from(pick(r, fixtures).subarray(0, 30_000));
      for (let i = 0; i < 20; i++) f[int(r, f.length)] = int(r, 256);
      return f;
    }
    case 11:
      return ogg.subarray(0, 1 + int(r, 8)); // tiny frames
    case 12:
      return Buffer.alloc(int(r, 16) ? 70_000 : 17_000_000, int(r, 256)); // over 64000, or now and then over the 16 MiB frame limit
    default:
      return pick(r, fixtures).subarray(0, 20_000);
  }
}

/** Sends `count` hostile messages, opening a new socket whenever the gateway closes one. */
async function fuzzClient(r: Rnd, i: number, count: number): Promise<number> {
  let sent = 0;
  for (let attempt = 0; sent < count && attempt < count; attempt++) {
    let c: TestClient;
    try {
      c = await openClient(url(i % 3 === 0 ? 'streams' : 'transcribe'));
    } catch {
      continue; // refused with an HTTP status: a clear answer, try again
    }
    c.ws.on('error', () => undefined);
    for (; sent < count && c.ws.readyState === c.ws.OPEN; sent++) {
      c.ws.send(hostileMessage(r));
      if (sent % 8 === 0) await new Promise((res) => setTimeout(res, int(r, 40)));
    }
    if (int(r, 3) === 0) c.ws.terminate();
    else if (c.ws.readyState === c.ws.OPEN) c.ws.close();
    await Promise.race([c.closed, new Promise((res) => setTimeout(res, 5000))]);
    c.ws.terminate();
  }
  return sent;
}

const r = prng(SEED);
let sent = 0;
const WAVE = 8; // clients at once
for (let wave = 0; wave < CLIENTS; wave += WAVE) {
  const counts = await Promise.all(
    Array.from({ length: Math.min(WAVE, CLIENTS - wave) }, (_, i) => fuzzClient(r, wave + i, MESSAGES)),
  );
  sent += counts.reduce((a, b) => a + b, 0);
}
process.stdout.write(`${JSON.stringify({ sent })}\n`);
process.exit(0);
