// The vendor SDK (@corti/sdk in proxy mode, unmodified) as a client of the gateway, over real sockets:
// the token as Sec-WebSocket-Protocol pairs, live Chromium WebM at real time. Then the network under
// it is dropped mid-stream (a TCP proxy resets the connection): what the SDK does on its own, which
// is what resume has to meet (the same URL and query again, queued audio first, then its config).
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromeChunks } from '../support/fixtures.js';
import type { Endpoint } from '../../src/protocol/endpoint.js';
import { newResumeKey, SDK_MESSAGE_TYPES, streamWithSdk, type SdkRun } from '../support/sdk.js';
import { endpointPath, englishConfiguration, startStack, type Stack } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { clientFrames, startTcpProxy, type ProxiedConnection, type TcpProxy } from '../support/tcp-proxy.js';

const webm = chromeChunks('webm-opus'); // ~7.7 s, one MediaRecorder chunk every 250 ms
const audioFormat = 'audio/webm;codecs=opus';
const configs = {
  transcribe: englishConfiguration('transcribe', audioFormat),
  streams: englishConfiguration('streams', audioFormat),
};

/** Text and binary frames only (a pong answering the gateway's ping is not the client's data). */
const dataFrames = (c: ProxiedConnection) => clientFrames(c.sent).filter((f) => f.opcode === 1 || f.opcode === 2);

function assertCompleteRun(run: SdkRun, endpoint: Endpoint, endType: string) {
  const label = `/${endpoint}`;
  assert.deepEqual(run.warnings, [], `${label}: the SDK warned of no message`);
  assert.deepEqual(
    run.messages.filter((m) => !SDK_MESSAGE_TYPES[endpoint].includes(m.type)),
    [],
    `${label}: only message types the SDK declares`,
  );
  assert.deepEqual(run.errors, [], `${label}: no error surfaced`);
  assert.deepEqual(
    run.messages.filter((m) => m.type === 'error'),
    [],
    `${label}: no error message`,
  );
  assert.ok(
    run.messages.some((m) => m.type === 'transcript'),
    `${label}: transcripts arrived`,
  );
  const usage = run.messages.find((m) => m.type === 'usage');
  assert.ok(usage && usage.credits > 0, `${label}: usage with credits (${JSON.stringify(usage)})`);
  assert.equal(run.messages.at(-1)!.type, endType, `${label}: the end message comes last`);
}

describe('the vendor SDK through the gateway', () => {
  let stack: Stack;
  let proxy: TcpProxy;
  beforeAll(async () => {
    stack = await startStack();
    proxy = await startTcpProxy(stack.gateway.server.port);
  });
  afterAll(async () => {
    await proxy?.close();
    await stack?.close();
  });

  it('streams live WebM on /transcribe and /streams: transcripts, usage and the end message, no warning', async () => {
    const [transcribe, streams] = await Promise.all(
      (['transcribe', 'streams'] as const).map(async (endpoint) =>
        streamWithSdk({
          base: stack.base,
          tenant: 'base',
          token: await stack.token(`openid ${endpoint}`),
          endpoint,
          configuration: configs[endpoint],
          pieces: webm,
        }),
      ),
    );
    assertCompleteRun(transcribe, 'transcribe', 'ended');
    assertCompleteRun(streams, 'streams', 'ENDED');
    assert.ok(
      streams.messages.some(
        (m) => m.type === 'transcript' && Array.isArray(m.data) && m.data.some((d: { final: boolean }) => d.final),
      ),
      '/streams: final segments',
    );
  });

  it('after a network drop mid-stream it reconnects to the same URL and query with the same protocols, queued audio first, then its config', async () => {
    const key = newResumeKey();
    const token = await stack.token('openid transcribe');
    const cutAt = 8; // 2 s in
    // The session's fate after the drop is the gateway's business (resume); only what the SDK sent is checked here.
    const outcome = await streamWithSdk({
      base: `ws://127.0.0.1:${proxy.port}`,
      tenant: 'base',
      token,
      endpoint: 'transcribe',
      configuration: configs.transcribe,
      pieces: webm,
      resumeKey: key,
      onPiece: (i) => i === cutAt && proxy.cutAll(),
      endTimeoutMs: 15_000,
    }).catch((e: Error) => e);

    assert.equal(
      proxy.connections.length,
      2,
      `one reconnection (${outcome instanceof Error ? outcome.message.slice(0, 300) : 'run ended'})`,
    );
    const [first, second] = proxy.connections;
    const requestLine = (c: ProxiedConnection) => c.head.split('\r\n')[0];
    const protocols = (c: ProxiedConnection) => c.head.split('\r\n').find((l) => /^sec-websocket-protocol:/i.test(l));
    assert.equal(requestLine(first), `GET ${endpointPath('transcribe')}?resume=${key} HTTP/1.1`);
    assert.equal(requestLine(second), requestLine(first), 'the same URL and query');
    assert.equal(
      protocols(first),
      `Sec-WebSocket-Protocol: Authorization,${encodeURIComponent(`Bearer ${token}`)},Tenant-Name,base`,
    );
    assert.equal(protocols(second), protocols(first), 'the same token, as subprotocols');

    const config = JSON.stringify({ type: 'config', configuration: configs.transcribe });
    const [before, after] = [dataFrames(first), dataFrames(second)];
    assert.equal(before[0].payload.toString(), config, 'first connection: config first');
    assert.deepEqual(
      before.slice(1).map((f) => f.payload),
      webm.slice(0, before.length - 1),
      'then the audio, piece by piece',
    );
    const configAt = after.findIndex((f) => f.opcode === 1);
    assert.ok(configAt > 0, `reconnection: audio before the config (frames: ${after.map((f) => f.opcode).join(',')})`);
    assert.equal(after[configAt].payload.toString(), config, 'the same config again');
    const resumedFrom = webm.findIndex((p) => p.equals(after[0].payload));
    assert.ok(
      resumedFrom >= before.length - 1 && resumedFrom <= cutAt + 1,
      `queued audio starts right after the cut (piece ${resumedFrom}; the first connection carried ${before.length - 1})`,
    );
    assert.deepEqual(
      after.filter((f) => f.opcode === 2).map((f) => f.payload),
      webm.slice(resumedFrom),
      'every later piece once, in order',
    );
  });
});

describe('the vendor SDK, unmodified, resumes its session through a network drop', () => {
  const API = 'test-usage-token';
  let stack: Stack;
  let proxy: TcpProxy;
  beforeAll(async () => {
    stack = await startStack({ USAGE_API_TOKEN: API });
    proxy = await startTcpProxy(stack.gateway.server.port);
  });
  afterAll(async () => {
    await proxy?.close();
    await stack?.close();
  });

  it('three at once: each gets every final once on one timeline, usage once, and stays one session in the ledger', async () => {
    const token = await stack.token('openid transcribe');
    const runs = await Promise.all(
      [6, 9, 12].map((cutAt) =>
        streamWithSdk({
          base: `ws://127.0.0.1:${proxy.port}`,
          tenant: 'base',
          token,
          endpoint: 'transcribe',
          configuration: configs.transcribe,
          pieces: webm,
          resumeKey: newResumeKey(),
          onPiece: (i) => i === cutAt && proxy.cutAll(),
          endTimeoutMs: 20_000,
        }),
      ),
    );
    for (const [i, run] of runs.entries()) {
      assert.ok(run.reopens >= 1, `run ${i}: the SDK reconnected`);
      assertCompleteRun(run, 'transcribe', 'ended');
      const resumed = run.messages.find((m) => m.type === 'CONFIG_ACCEPTED');
      assert.equal(resumed?.resumed, true, `run ${i}: its session was resumed, not restarted`);
      const f = finals(run.messages);
      for (let k = 1; k < f.length; k++)
        assert.ok(Math.abs(f[k].start - f[k - 1].end) < 1e-6, `run ${i}: final ${k} follows final ${k - 1}`);
      assert.ok(
        f.at(-1)!.end > 6,
        `run ${i}: the finals cover the stream but what was lost in flight (${f.at(-1)!.end} s)`,
      );
      assert.equal(run.messages.filter((m) => m.type === 'usage').length, 1, `run ${i}: usage once`);
    }
    const rows = await endedLedgerSessions(stack, API);
    assert.equal(rows.length, runs.length, 'one ledger session per dictation');
    assert.ok(
      rows.every((r) => r.outcome === 'ended' && !r.estimated),
      JSON.stringify(rows.map((r) => [r.outcome, r.estimated])),
    );
  });
});
