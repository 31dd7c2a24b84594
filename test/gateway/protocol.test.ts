// The client protocol over real sockets (the message order, config validation, the config timeout,
// flush and end; see docs/protocol.md): a ws client → the uWS gateway → the upstream emulator, all on
// loopback. Each test checks what the client sees AND what the upstream received (the gateway must
// never pass on a config or audio the protocol forbids).
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { protocolViolations } from '../support/emulator.js';
import { chromeChunks, fixture } from '../support/fixtures.js';
import { configured, refusal, startStack, type Stack, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const ogg = fixture('dictation.ogg');
const chromeWebm = chromeChunks('webm-opus'); // its 31 chunks

function sendInChunks(c: TestClient, audio: Buffer, size: number) {
  for (let off = 0; off < audio.length; off += size) c.send(audio.subarray(off, off + size));
}

describe('gateway protocol over real sockets', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      PACE: '20',
      CONFIG_TIMEOUT_MS: '1500',
      STREAM_MAX_SECONDS: '3',
      UPSTREAM_RECONNECT_ATTEMPTS: '2',
    });
  });
  afterAll(() => stack.close());

  it('serves with the native uWS build, not the pure-JS fallback', async () => {
    const res = await fetch(`${stack.base.replace('ws:', 'http:')}/healthz`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('uwebsockets'), '20', 'native uWS answers with its uwebsockets header');
  });

  it('/transcribe: config → CONFIG_ACCEPTED → transcripts covering all audio → flush → end, in that order', async () => {
    const c = await stack.connect('transcribe');
    const acc = await configured(c, { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' });
    assert.match(acc.sessionId, /^[0-9a-f-]{36}$/);
    assert.equal(acc.configuration.primaryLanguage, 'en');
    sendInChunks(c, ogg, 4000);
    c.sendJson({ type: 'flush' });
    await c.next('flushed', 20_000);
    await c.next('delta_usage');
    c.sendJson({ type: 'end' });
    await c.next('ended', 20_000);
    const { code } = await c.closed;
    assert.equal(code, 1000);

    const t = c.types();
    assert.ok(t.indexOf('flushed') < t.indexOf('delta_usage'), 'flushed before delta_usage');
    assert.ok(
      t.indexOf('usage') < t.indexOf('ended') && t.indexOf('ended') === t.length - 1,
      'usage, then ended, last',
    );
    const f = finals(c.messages);
    // The emulator emits one final segment per second of media received: contiguous, no gap, no repeat.
    for (let i = 1; i < f.length; i++) assert.equal(f[i].start, f[i - 1].end, `segment ${i} follows ${i - 1}`);
    assert.ok(f.at(-1)!.end > 25 && f.at(-1)!.end < 27.5, `transcripts cover the ~26 s file (got ${f.at(-1)!.end})`);

    const up = stack.emulator.sessions.at(-1)!;
    assert.ok(Buffer.compare(up.audio, ogg) === 0, 'the upstream received the Ogg file byte for byte');
    assert.deepEqual(protocolViolations(stack.emulator), []);
  });

  it('/streams: facts mode over browser WebM chunks, ENDED after usage', async () => {
    const c = await stack.connect('streams');
    await configured(c, {
      transcription: { primaryLanguage: 'en' },
      mode: { type: 'facts', outputLocale: 'en' },
      audioFormat: 'audio/webm;codecs=opus',
    });
    for (const chunk of chromeWebm) c.send(chunk);
    c.sendJson({ type: 'flush' });
    await c.next('flushed', 20_000);
    c.sendJson({ type: 'end' });
    await c.next('ENDED', 20_000);
    assert.equal((await c.closed).code, 1000);
    const t = c.types();
    assert.ok(t.includes('transcript') && t.includes('facts'), `transcripts and facts arrive (got ${t})`);
    assert.ok(t.indexOf('usage') < t.indexOf('ENDED'));
    assert.ok(Buffer.compare(stack.emulator.sessions.at(-1)!.audio, Buffer.concat(chromeWebm)) === 0);
    assert.deepEqual(protocolViolations(stack.emulator), []);
  });

  it('no config within CONFIG_TIMEOUT_MS: CONFIG_TIMEOUT on /transcribe, CONFIG_NOT_PROVIDED on /streams, then close; upstream never contacted', async () => {
    const before = stack.emulator.sessions.length;
    for (const [endpoint, type] of [
      ['transcribe', 'CONFIG_TIMEOUT'],
      ['streams', 'CONFIG_NOT_PROVIDED'],
    ] as const) {
      const c = await stack.connect(endpoint);
      await c.next(type, 5000);
      const { code } = await c.closed;
      assert.equal(code, 4008);
    }
    assert.equal(stack.emulator.sessions.length, before);
  });

  const invalid: Array<[string, 'transcribe' | 'streams', object, RegExp]> = [
    ['missing primaryLanguage', 'transcribe', { interimResults: true }, /primaryLanguage/],
    ['wrong type', 'transcribe', { primaryLanguage: 'en', interimResults: 'yes' }, /interimResults/],
    [
      'bad formatting enum',
      'transcribe',
      { primaryLanguage: 'en', formatting: { dates: 'yesterday' } },
      /formatting\.dates/,
    ],
    [
      'duplicate command ids',
      'transcribe',
      {
        primaryLanguage: 'en',
        commands: [
          { id: 'a', phrases: ['go'] },
          { id: 'a', phrases: ['stop'] },
        ],
      },
      /commands/,
    ],
    [
      'command without phrases',
      'transcribe',
      { primaryLanguage: 'en', commands: [{ id: 'a', phrases: [] }] },
      /phrases/,
    ],
    [
      'enum variable without values',
      'transcribe',
      {
        primaryLanguage: 'en',
        commands: [{ id: 'a', phrases: ['go to {x}'], variables: [{ key: 'x', type: 'enum' }] }],
      },
      /enum/,
    ],
    [
      'wildcard without trigger word',
      'transcribe',
      { primaryLanguage: 'en', commands: [{ id: 'a', phrases: ['{x}'], variables: [{ key: 'x', type: 'wildcard' }] }] },
      /wildcard|trigger/i,
    ],
    [
      'two wildcards without literal between',
      'transcribe',
      {
        primaryLanguage: 'en',
        commands: [
          {
            id: 'a',
            phrases: ['note {x}{y}'],
            variables: [
              { key: 'x', type: 'wildcard' },
              { key: 'y', type: 'wildcard' },
            ],
          },
        ],
      },
      /wildcard|literal/i,
    ],
    [
      'undeclared variable',
      'transcribe',
      { primaryLanguage: 'en', commands: [{ id: 'a', phrases: ['go to {nowhere}'] }] },
      /nowhere|variable/,
    ],
    [
      'keyterm over 50 characters',
      'transcribe',
      { primaryLanguage: 'en', keyterms: { terms: [{ term: 'x'.repeat(51) }] } },
      /keyterms/,
    ],
    [
      '1001 replacements',
      'transcribe',
      { primaryLanguage: 'en', replacements: Array.from({ length: 1001 }, () => ({ find: 'a', replace: 'b' })) },
      /replacements/,
    ],
    ['streams: missing mode.type', 'streams', { transcription: { primaryLanguage: 'en' }, mode: {} }, /mode\.type/],
    [
      'streams: facts without outputLocale',
      'streams',
      { transcription: { primaryLanguage: 'en' }, mode: { type: 'facts' } },
      /outputLocale/,
    ],
    [
      'streams: bad factGenerationInterval',
      'streams',
      {
        transcription: { primaryLanguage: 'en' },
        mode: { type: 'facts', outputLocale: 'en', factGenerationInterval: 'often' },
      },
      /factGenerationInterval/,
    ],
    [
      'streams: bad retentionPolicy',
      'streams',
      { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' }, retentionPolicy: 'forever' },
      /retentionPolicy/,
    ],
    [
      'streams: keyterm of 6 words',
      'streams',
      {
        transcription: { primaryLanguage: 'en' },
        mode: { type: 'transcription' },
        keyterms: { terms: [{ term: 'one two three four five six' }] },
      },
      /keyterms/,
    ],
    [
      'streams: participant without role',
      'streams',
      { transcription: { primaryLanguage: 'en', participants: [{ channel: 0 }] }, mode: { type: 'transcription' } },
      /participants/,
    ],
  ];
  for (const [name, endpoint, configuration, reason] of invalid) {
    it(`invalid config (${name}) → CONFIG_DENIED naming the field; nothing upstream`, async () => {
      const before = stack.emulator.sessions.length;
      const c = await stack.connect(endpoint);
      c.sendJson({ type: 'config', configuration });
      const denied = await c.next('CONFIG_DENIED');
      assert.match(denied.reason, reason);
      assert.equal((await c.closed).code, 4400);
      assert.equal(stack.emulator.sessions.length, before, 'the upstream never saw this config');
    });
  }

  it('legacy isDiarization is accepted and normalised to diarize upstream', async () => {
    const c = await stack.connect('streams');
    await configured(c, {
      transcription: { primaryLanguage: 'en', isDiarization: true },
      mode: { type: 'transcription' },
    });
    const up = stack.emulator.sessions.at(-1)!.config as { transcription: Record<string, unknown> };
    assert.equal(up.transcription.diarize, true);
    assert.equal('isDiarization' in up.transcription, false);
    c.sendJson({ type: 'end' });
    await c.next('ENDED');
  });

  it('unsupported audioFormat → CONFIG_REJECTED; nothing upstream', async () => {
    const before = stack.emulator.sessions.length;
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'video/x-msvideo' } });
    const r = await c.next('CONFIG_REJECTED');
    assert.match(r.reason, /audioFormat/);
    assert.equal((await c.closed).code, 4415);
    assert.equal(stack.emulator.sessions.length, before);
  });

  it('a second config → CONFIG_ALREADY_RECEIVED; the upstream sees one config', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en' });
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'de' } });
    await c.next('CONFIG_ALREADY_RECEIVED');
    c.sendJson({ type: 'end' });
    await c.next('ended');
    assert.equal(stack.emulator.sessions.at(-1)!.configCount, 1);
  });

  it('audio before config → CONFIG_MISSING, and it never reaches the upstream', async () => {
    const c = await stack.connect('transcribe');
    c.send(ogg.subarray(0, 4000));
    await c.next('CONFIG_MISSING');
    await configured(c, { primaryLanguage: 'en' });
    c.sendJson({ type: 'end' });
    await c.next('ended');
    assert.equal(stack.emulator.sessions.at(-1)!.audio.length, 0);
    assert.deepEqual(protocolViolations(stack.emulator), []);
  });

  it('malformed JSON, wrong types and unknown message types get specific errors; the session carries on', async () => {
    const c = await stack.connect('transcribe');
    c.send('{"type": "config", ');
    const e1 = await c.next('error');
    assert.equal(e1.error.id, 'INVALID_MESSAGE');
    assert.match(e1.error.details, /JSON/);
    c.send('{"type": 42}');
    const e2 = await c.next('error');
    assert.match(e2.error.details, /type/);
    c.send('{"type": "dance"}');
    const e3 = await c.next('error');
    assert.equal(e3.error.id, 'UNKNOWN_MESSAGE_TYPE');
    await configured(c, { primaryLanguage: 'en' });
    c.sendJson({ type: 'end' });
    await c.next('ended');
  });

  it('frames over 64000 bytes are split, never refused, and arrive whole', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en', audioFormat: 'audio/ogg' });
    c.send(ogg); // one 70 KB frame
    c.sendJson({ type: 'end' });
    await c.next('ended', 20_000);
    const up = stack.emulator.sessions.at(-1)!;
    assert.ok(up.frames.length >= 2);
    assert.ok(
      up.frames.every((n) => n <= 64000),
      `frames: ${up.frames}`,
    );
    assert.ok(Buffer.compare(up.audio, ogg) === 0);
  });

  it('a client that disconnects without end: the gateway ends the upstream session so usage is final', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en', audioFormat: 'audio/ogg' });
    sendInChunks(c, ogg.subarray(0, 20_000), 4000);
    await delay(200);
    c.ws.terminate();
    const up = stack.emulator.sessions.at(-1)!;
    for (let i = 0; i < 100 && !up.closed; i++) await delay(100);
    assert.ok(
      up.received.some((r) => r.kind === 'end'),
      'end was sent upstream',
    );
    assert.ok(
      up.sent.some((m) => (m as { type: string }).type === 'usage'),
      'the upstream produced its final usage',
    );
  });

  it('an upstream that fails mid-session and cannot be replaced: the client gets an error in the catalogue shape and close code 1014', async () => {
    const c = await stack.connect('transcribe');
    await configured(c, { primaryLanguage: 'en' });
    stack.emulator.faults.rejectUpgradeStatus = 503; // every reconnection attempt fails
    stack.emulator.dropAllSessions();
    const e = await c.next('error').finally(() => (stack.emulator.faults.rejectUpgradeStatus = null));
    assert.equal(e.error.id, 'UPSTREAM_CLOSED');
    assert.deepEqual(Object.keys(e.error).sort(), ['details', 'doc', 'id', 'status', 'title']);
    assert.equal((await c.closed).code, 1014);
  });

  it('/streams ends gracefully at STREAM_MAX_SECONDS: usage, ENDED, close', async () => {
    const c = await stack.connect('streams');
    await configured(c, { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' } });
    await c.next('ENDED', 8000);
    assert.equal((await c.closed).code, 1000);
    const t = c.types();
    assert.ok(t.indexOf('usage') >= 0 && t.indexOf('usage') < t.indexOf('ENDED'));
    assert.ok(stack.emulator.sessions.at(-1)!.received.some((r) => r.kind === 'end'));
  });

  it('refuses a /streams path whose interaction id is not a UUID, and unknown paths, at the upgrade', async () => {
    const token = await stack.token('openid streams');
    const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
    const bad = await refusal(`${stack.base}/audio-bridge/v2/interactions/not-a-uuid/streams?${q}`);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.id, 'INVALID_INTERACTION_ID');
    const unknown = await refusal(`${stack.base}/audio-bridge/v2/elsewhere?${q}`);
    assert.equal(unknown.status, 404);
  });

  it('answers a plain HTTP request for a path it does not serve 404, in the ops API error shape', async () => {
    const res = await fetch(`http://127.0.0.1:${stack.gateway.server.port}/v1/no-such-report`);
    assert.equal(res.status, 404);
    const body = (await res.json()) as { type: string; error: { id: string } };
    assert.deepEqual([body.type, body.error.id], ['error', 'NOT_FOUND']);
  });
});
