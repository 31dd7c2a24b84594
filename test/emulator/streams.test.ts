import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import assert from 'node:assert/strict';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { evenChunks, fixture } from '../support/fixtures.js';
import { connect, streamsUrl } from './ws-client.js';

const webm = fixture('dictation.webm');
const facts = (mode: Record<string, unknown>) => ({
  type: 'config',
  configuration: { transcription: { primaryLanguage: 'en' }, mode: { type: 'facts', outputLocale: 'en', ...mode } },
});

describe('emulator /streams', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator();
  });
  afterEach(() => {
    em.violations.length = 0;
  });
  afterAll(() => em.close());
  const open = async () =>
    connect(streamsUrl(em.wsBase, 'base', await em.issueToken({ tenant: 'base', scope: 'openid streams' })));

  it('fast_init facts follow media time (10 s, 20 s), then one more on end; ENDED closes with 1000', async () => {
    const c = await open();
    c.sendJson(facts({ factGenerationInterval: 'fast_init' }));
    const accepted = await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    assert.equal(accepted.configuration.transcription.diarize, false);
    for (const f of evenChunks(webm, 4096)) c.ws.send(f);
    c.sendJson({ type: 'end' });
    assert.equal((await c.closed).code, 1000);

    const types = c.messages.map((m) => m.type);
    assert.deepEqual(types.slice(-2), ['usage', 'ENDED']);
    const factTexts = c.messages.filter((m) => m.type === 'facts').map((m) => m.fact[0].text);
    assert.equal(factTexts.length, 3);
    assert.match(factTexts[0], /at 10\.00 s/);
    assert.match(factTexts[1], /at 20\.00 s/);
    assert.match(factTexts[2], /at 25\.90 s/);
    // The first fact comes right after the segment ending at 10 s.
    const i = types.indexOf('facts');
    assert.equal(c.messages[i - 1].data[0].time.end, 10);

    const seg = c.messages.find((m) => m.type === 'transcript').data[0];
    assert.deepEqual(Object.keys(seg).sort(), ['final', 'id', 'participant', 'speakerId', 'time', 'transcript']);
    assert.equal(seg.speakerId, -1);
    assert.deepEqual(seg.participant, { channel: 0 });
    const last = c.messages.filter((m) => m.type === 'transcript').at(-1).data[0];
    assert.equal(last.time.end, 25.9);
    const fact = c.messages.find((m) => m.type === 'facts').fact[0];
    assert.deepEqual(
      Object.keys(fact).sort(),
      ['createdAt', 'groupId', 'group', 'id', 'isDiscarded', 'source', 'text', 'updatedAt'].sort(),
    );
    assert.equal(c.messages.find((m) => m.type === 'usage').credits, 2.59);
    assert.equal(em.violations.filter((v) => !/pacing/.test(v)).length, 0);
  });

  it('fixed interval: no fact before 60 s of media, but one on flush before flushed', async () => {
    const c = await open();
    c.sendJson(facts({}));
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    for (const f of evenChunks(webm, 4096)) c.ws.send(f);
    c.sendJson({ type: 'flush' });
    await c.next((m) => m.type === 'delta_usage');
    const types = c.messages.map((m) => m.type).filter((t) => t !== 'transcript');
    assert.deepEqual(types, ['CONFIG_ACCEPTED', 'facts', 'flushed', 'delta_usage']);
    c.ws.close();
  });

  it('transcription mode sends no facts; a config without mode.type is denied', async () => {
    const c = await open();
    c.sendJson({
      type: 'config',
      configuration: { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' } },
    });
    await c.next((m) => m.type === 'CONFIG_ACCEPTED');
    for (const f of evenChunks(webm, 4096).slice(0, 6)) c.ws.send(f);
    c.sendJson({ type: 'flush' });
    c.sendJson({ type: 'end' });
    await c.closed;
    assert.ok(!c.messages.some((m) => m.type === 'facts'));
    assert.deepEqual(c.messages.map((m) => m.type).slice(-4), ['flushed', 'delta_usage', 'usage', 'ENDED']);

    const d = await open();
    d.sendJson({ type: 'config', configuration: { transcription: { primaryLanguage: 'en' } } });
    assert.match((await d.next((m) => m.type === 'CONFIG_DENIED')).reason, /mode\.type/);
  });

  it('closes with CONFIG_NOT_PROVIDED when no config arrives in time', async () => {
    const quick = await startEmulator({ configTimeoutMs: 50 });
    try {
      const c = await connect(streamsUrl(quick.wsBase, 'base', await quick.issueToken({ tenant: 'base' })));
      assert.equal((await c.closed).code, 1008);
      assert.deepEqual(
        c.messages.map((m) => m.type),
        ['CONFIG_NOT_PROVIDED'],
      );
    } finally {
      await quick.close();
    }
  });
});
