import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { evenChunks, fixture } from '../support/fixtures.js';
import { finals, type Final } from '../support/transcripts.js';
import { connect, transcribeUrl } from './ws-client.js';
import { delay } from '../support/wait.js';

const ogg = fixture('dictation.ogg');

/** Asserts the final segments tile [0, end] with no gap and no overlap. */
function assertTiles(ranges: Final[], end: number) {
  assert.equal(ranges[0].start, 0);
  for (let i = 1; i < ranges.length; i++) assert.equal(ranges[i].start, ranges[i - 1].end, `gap/overlap at ${i}`);
  assert.ok(Math.abs(ranges.at(-1)!.end - end) < 0.001, `ends at ${ranges.at(-1)!.end}`);
}

describe('emulator /transcribe', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator();
  });
  afterEach(() => {
    em.violations.length = 0;
    Object.assign(em.faults, {
      configDelayMs: 0,
      messageDelayMs: 0,
      refuseConfigs: false,
      dropAfterMediaSeconds: null,
      stall: false,
    });
  });
  afterAll(() => em.close());
  const open = async () => connect(transcribeUrl(em.wsBase, 'base', await em.issueToken({ tenant: 'base' })));

  it('happy path: config, one final segment per second of the Ogg/Opus audio, flush, end', async () => {
    const c = await open();
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' } });
    const accepted = await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    assert.match(accepted.sessionId, /^[0-9a-f-]{36}$/);
    assert.equal(accepted.configuration.primaryLanguage, 'en');
    assert.equal(accepted.configuration.formatting.dates, 'locale:long');
    for (const f of evenChunks(ogg, 4096)) c.ws.send(f);
    c.sendJson({ type: 'flush' });
    await c.next((m) => m.type === 'delta_usage');
    c.sendJson({ type: 'end' });
    const { code } = await c.closed;
    assert.equal(code, 1000);

    const types = c.messages.map((m) => m.type);
    const t = types.filter((x) => x !== 'transcript');
    assert.deepEqual(t, ['CONFIG_ACCEPTED', 'flushed', 'delta_usage', 'usage', 'ended']);
    assert.ok(types.indexOf('flushed') > types.lastIndexOf('transcript'));
    const ranges = finals(c.messages);
    assert.equal(ranges.length, 26); // 25 whole seconds + the 0.92 s remainder on flush
    assertTiles(ranges, 25.92);
    assert.match(c.messages[1].data.text, /^\[emulator\] segment 0 \(0\.00-1\.00 s\)$/);
    assert.equal(c.messages.find((m) => m.type === 'delta_usage').credits, 2.592);
    assert.equal(c.messages.find((m) => m.type === 'usage').credits, 2.592);

    const s = em.sessions.at(-1)!;
    assert.ok(s.audio.equals(ogg));
    assert.equal(s.frames.length, Math.ceil(ogg.length / 4096));
    assert.equal(s.mediaSeconds, 25.92);
    assert.deepEqual(
      s.received.map((r) => r.kind).filter((k) => k !== 'audio'),
      ['config', 'flush', 'end'],
    );
    assert.equal(s.closeCode, 1000);
    // Sent as fast as possible: the only rule broken is pacing.
    assert.equal(em.violations.length, 1);
    assert.match(em.violations[0], /pacing/);
  });

  it('delta_usage counts only credits since the previous flush; usage is the session total', async () => {
    const c = await open();
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    const frames = evenChunks(ogg, 4096);
    frames.slice(0, 8).forEach((f) => c.ws.send(f));
    c.sendJson({ type: 'flush' });
    const d1 = await c.next((m) => m.type === 'delta_usage');
    frames.slice(8).forEach((f) => c.ws.send(f));
    c.sendJson({ type: 'flush' });
    const d2 = await c.next((m) => m.type === 'delta_usage' && m !== d1);
    c.sendJson({ type: 'end' });
    await c.closed;
    assert.ok(d1.credits > 0 && d2.credits > 0);
    assert.equal(Math.round((d1.credits + d2.credits) * 10_000) / 10_000, 2.592);
    assertTiles(finals(c.messages), 25.92);
  });

  it('sends interim results when asked, and the first command at the 5-second mark', async () => {
    const c = await open();
    c.sendJson({
      type: 'config',
      configuration: {
        primaryLanguage: 'en',
        interimResults: true,
        commands: [{ id: 'next-section', phrases: ['next section'] }],
      },
    });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    for (const f of evenChunks(ogg, 1000)) c.ws.send(f);
    c.sendJson({ type: 'end' });
    await c.closed;
    const interims = c.messages.filter((m) => m.type === 'transcript' && !m.data.isFinal);
    assert.ok(interims.length > 0);
    const commands = c.messages.filter((m) => m.type === 'command');
    assert.equal(commands.length, 1);
    assert.deepEqual(commands[0].data, {
      id: 'next-section',
      variables: {},
      rawTranscriptText: 'next section',
      start: 4,
      end: 5,
    });
    assertTiles(finals(c.messages), 25.92);
  });

  it('answers bad configs with CONFIG_DENIED / CONFIG_REJECTED and a second config with CONFIG_ALREADY_RECEIVED', async () => {
    const denied = await open();
    denied.sendJson({ type: 'config', configuration: { interimResults: true } });
    assert.match((await denied.next((m) => m.type === 'CONFIG_DENIED')).reason, /primaryLanguage/);
    await denied.closed;

    const rejected = await open();
    rejected.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/wav' } });
    await rejected.next((m) => m.type === 'CONFIG_REJECTED');
    await rejected.closed;

    const twice = await open();
    twice.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    twice.sendJson({ type: 'config', configuration: { primaryLanguage: 'de' } });
    await twice.next((m) => m.type === 'CONFIG_ALREADY_RECEIVED');
    twice.ws.close();
    assert.deepEqual(
      em.violations.map((v) => v.replace(/^.*?: /, '')),
      ['a second config'],
    );
    assert.equal(em.sessions.at(-1)!.configCount, 2);
  });

  it('closes with CONFIG_TIMEOUT when no config arrives in time', async () => {
    const quick = await startEmulator({ configTimeoutMs: 50 });
    try {
      const c = await connect(transcribeUrl(quick.wsBase, 'base', await quick.issueToken({ tenant: 'base' })));
      const { code } = await c.closed;
      assert.deepEqual(
        c.messages.map((m) => m.type),
        ['CONFIG_TIMEOUT'],
      );
      assert.equal(code, 1008);
    } finally {
      await quick.close();
    }
  });

  it('records audio before config and oversize frames as violations', async () => {
    const c = await open();
    c.ws.send(ogg.subarray(0, 4096));
    await c.next((m) => m.type === 'CONFIG_MISSING');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    c.ws.send(Buffer.alloc(70_000));
    c.sendJson({ type: 'end' });
    await c.closed;
    assert.equal(em.violations.length, 2);
    assert.match(em.violations[0], /audio before config/);
    assert.match(em.violations[1], /70000 bytes/);
  });

  it('records a first frame without a container header and messages after end', async () => {
    const c = await open();
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    c.ws.send(Buffer.alloc(3200)); // raw PCM silence
    c.sendJson({ type: 'end' });
    c.sendJson({ type: 'flush' });
    await c.closed;
    assert.equal(em.violations.length, 2);
    assert.match(em.violations[0], /container header/);
    assert.match(em.violations[1], /after end/);
  });

  it('dropAllSessions terminates live sockets without a close frame', async () => {
    const a = await open();
    const b = await open();
    em.dropAllSessions();
    assert.equal((await a.closed).code, 1006);
    assert.equal((await b.closed).code, 1006);
    assert.ok(em.sessions.slice(-2).every((s) => s.closed && s.closeCode === 1006));
  });

  it('faults: refuseConfigs denies, dropAfterMediaSeconds terminates mid-stream', async () => {
    em.faults.refuseConfigs = true;
    const refused = await open();
    refused.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    assert.equal((await refused.next((m) => m.type === 'CONFIG_DENIED')).reason, 'emulator: refuseConfigs');
    em.faults.refuseConfigs = false;

    em.faults.dropAfterMediaSeconds = 3;
    const c = await open();
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    for (const f of evenChunks(ogg, 4096)) if (c.ws.readyState === c.ws.OPEN) c.ws.send(f);
    assert.equal((await c.closed).code, 1006);
    const s = em.sessions.at(-1)!;
    assert.ok(s.mediaSeconds >= 3 && s.mediaSeconds < 25);
  });

  it('faults: stall holds every message until released, then delivers them in order', async () => {
    const c = await open();
    em.faults.stall = true;
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    for (const f of evenChunks(ogg, 4096).slice(0, 4)) c.ws.send(f);
    c.sendJson({ type: 'flush' });
    // The emulator has received everything (its log shows the flush) yet sent nothing.
    while (!em.sessions.at(-1)!.received.some((r) => r.kind === 'flush')) await delay(10);
    await delay(100);
    assert.equal(c.messages.length, 0);
    em.faults.stall = false;
    await c.next((m) => m.type === 'delta_usage');
    assert.equal(c.messages[0].type, 'CONFIG_ACCEPTED');
    c.ws.close();
  });

  it('faults: configDelayMs holds CONFIG_ACCEPTED; audio sent before it is a violation but still counted', async () => {
    em.faults.configDelayMs = 200;
    em.faults.messageDelayMs = 20;
    const c = await open();
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en' } });
    for (const f of evenChunks(ogg, 4096)) c.ws.send(f);
    c.sendJson({ type: 'end' });
    await c.closed;
    assert.equal(c.messages[0].type, 'CONFIG_ACCEPTED');
    assert.deepEqual(
      c.messages.slice(-2).map((m) => m.type),
      ['usage', 'ended'],
    );
    assert.equal(c.messages.at(-2).credits, 2.592);
    assert.equal(em.violations.filter((v) => /audio before CONFIG_ACCEPTED/.test(v)).length, 1); // once, not per frame
  });
});
