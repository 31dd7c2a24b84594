// Test support: one real Session against the real upstream emulator and a real in-process ledger,
// with its client socket replaced by a sink the test controls (to model a socket layer that
// breaks, or a client that falls behind). Everything but the client socket is the real thing.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createUpstreamCredentials } from '../../src/auth/index.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { Session, type ClientSink } from '../../src/session/index.js';
import { logger } from '../../src/telemetry/index.js';
import { createUsage, type Usage } from '../../src/usage/index.js';

export interface Harness {
  emulator: Emulator;
  usage: Usage;
  /** A /transcribe session whose client is `sink`; `finished` resolves when the session is over. */
  open(sink: ClientSink): Promise<{ session: Session; finished: Promise<void>; text(message: object): void }>;
  /** The ledger's rows for tenant base, newest last. */
  ledger(): Promise<Array<{ outcome: string; end: string | null; estimated: boolean }>>;
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const emulator = await startEmulator();
  const usage = await createUsage({
    journalDir: mkdtempSync(join(tmpdir(), 'sgw-harness-')),
    retentionDays: 1,
    maxSessionsPerTenant: 0,
    apiToken: 'x',
  });
  return {
    emulator,
    usage,
    async open(sink) {
      const token = await emulator.issueToken({ tenant: 'base', scope: 'openid transcribe' });
      const session = new Session(
        {
          settings: {
            upstreamWsBase: emulator.wsBase,
            configTimeoutMs: 5000,
            streamMaxSeconds: 60,
            chunkMs: 250,
            pace: 20,
            maxBufferedAudioBytes: 1 << 20,
            endTimeoutMs: 5000,
            reconnect: { attempts: 0, maxSeconds: 1, replayBytes: 1 << 20 },
            resumeGraceSeconds: 0,
          },
          credentials: createUpstreamCredentials({ mode: 'passthrough', authUrl: emulator.authBase }),
          ledger: usage.ledger,
          limiter: usage.limiter,
          logger,
        },
        {
          sessionKey: `harness-${Math.random()}`,
          endpoint: 'transcribe',
          tenant: 'base',
          environment: 'eu',
          clientToken: token,
        },
        sink,
      );
      const finished = new Promise<void>((resolve) => session.on((e) => e.type === 'finished' && resolve()));
      const text = (message: object) => {
        const b = Buffer.from(JSON.stringify(message));
        session.onClientText(b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer);
      };
      return { session, finished, text };
    },
    async ledger() {
      const answer = await usage.api.handle({
        method: 'GET',
        path: '/v1/usage/sessions',
        query: new URLSearchParams({ tenant: 'base' }),
        authorization: 'Bearer x',
      });
      return (answer?.body as { sessions: Array<{ outcome: string; end: string | null; estimated: boolean }> })
        .sessions;
    },
    async close() {
      await usage.close();
      await emulator.close();
    },
  };
}
