// Hostile review over real sockets (ws client → uWS gateway → upstream emulator): one config message
// nested 5,000 levels deep used to pass validation and then throw in JSON.stringify on the way
// upstream, killing the process. It is denied now, never reaches the upstream, and the gateway lives on.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';

describe('a config nested 5,000 levels deep', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('gets CONFIG_DENIED with a depth reason and close 4400; the upstream never sees it', async () => {
    const before = stack.emulator.sessions.length;
    const c = await stack.connect('transcribe');
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    c.send(`{"type":"config","configuration":{"primaryLanguage":"en","x":${deep}}}`); // 10 KB
    const denied = await c.next('CONFIG_DENIED');
    assert.match(denied.reason, /^configuration\.x(\[0\]){10}: nested more than 10 levels deep$/);
    assert.equal((await c.closed).code, 4400);
    assert.equal(stack.emulator.sessions.length, before, 'the upstream never saw this config');
  });

  it('the same on /streams, in a known object; then a normal session still works (the process lives)', async () => {
    const before = stack.emulator.sessions.length;
    const c = await stack.connect('streams');
    const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
    c.send(
      `{"type":"config","configuration":{"transcription":{"primaryLanguage":"en","x":${deep}},"mode":{"type":"transcription"}}}`,
    );
    assert.match(
      (await c.next('CONFIG_DENIED')).reason,
      /^configuration\.transcription\.x(\.a){9}: nested more than 10 levels deep$/,
    );
    assert.equal((await c.closed).code, 4400);
    assert.equal(stack.emulator.sessions.length, before);

    const ok = await stack.connect('transcribe');
    ok.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await ok.next('CONFIG_ACCEPTED');
    assert.equal(stack.emulator.sessions.length, before + 1);
    ok.sendJson({ type: 'end' });
    await ok.next('ended');
    assert.equal((await ok.closed).code, 1000);
  });

  it('a 200 KB unknown string is denied naming the field; an unsupported audioFormat is echoed short', async () => {
    const c = await stack.connect('transcribe');
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', note: 'n'.repeat(200_000) } });
    assert.equal((await c.next('CONFIG_DENIED')).reason, 'configuration.note: at most 1000 characters (got 200000)');
    assert.equal((await c.closed).code, 4400);

    const r = await stack.connect('transcribe');
    r.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: `audio/x-${'z'.repeat(240)}` } });
    const rejected = await r.next('CONFIG_REJECTED');
    assert.equal(
      rejected.reason,
      `configuration.audioFormat: unsupported audio format "audio/x-${'z'.repeat(32)}…" (248 chars)`,
    );
    assert.equal((await r.closed).code, 4415);
  });
});
