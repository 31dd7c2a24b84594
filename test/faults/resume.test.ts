// Chaos: the client's network drops mid-dictation; it comes back with the same resume key and takes
// its session over, many sessions at once. Real sockets: ws clients → uWS gateway → emulator.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { protocolViolations } from '../support/emulator.js';
import { chromeChunks } from '../support/fixtures.js';
import { metric } from '../support/metrics.js';
import { openClient, openConfigured, refusal, resumeUrl, startStack, type Stack } from '../support/stack.js';
import { endedLedgerSessions, ledgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';
import { finals } from '../support/transcripts.js';

const API = 'test-usage-token';
const chunks = chromeChunks('webm-opus'); // ~7.7 s of live Chromium WebM, 250 ms a chunk
const whole = Buffer.concat(chunks);
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

/** A /transcribe URL with a fresh resume key (the same URL for every connection of one session). */
async function resumableUrl(stack: Stack, o: { key?: string; tenant?: string; token?: string } = {}): Promise<string> {
  const token = o.token ?? (await stack.token('openid transcribe', o.tenant));
  return resumeUrl(stack.base, o.tenant ?? 'base', o.key ?? randomBytes(18).toString('base64url'), token);
}

describe('a client that drops and resumes', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '4', USAGE_API_TOKEN: API, RESUME_GRACE_SECONDS: '3' });
  });
  afterAll(() => stack.close());

  /** First connection streams part of the audio and is cut (no close frame); the second resumes it. */
  async function dropAndResume() {
    const url = await resumableUrl(stack);
    const { client: first, accepted } = await openConfigured(url, configuration);
    const cut = 12 + Math.floor(Math.random() * 8);
    for (const chunk of chunks.slice(0, cut)) first.send(chunk);
    await delay(300);
    first.ws.terminate(); // the network drops
    await delay(400);

    // A careful client: config first, then the audio from where the gateway says it stands.
    const { client: second, accepted: resumed } = await openConfigured(url, configuration);
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.sessionId, accepted.sessionId, 'the original session');
    assert.ok(resumed.audioBytes > 0 && resumed.audioBytes <= whole.length, `audioBytes ${resumed.audioBytes}`);
    for (let off = resumed.audioBytes; off < whole.length; off += 16_000)
      second.send(whole.subarray(off, off + 16_000));
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    assert.equal((await second.closed).code, 1000);
    return { first, second, accepted };
  }

  it('many at once: every final exactly once across both sockets, on one timeline; one session in the ledger', async () => {
    const runs = await Promise.all(Array.from({ length: 5 }, () => dropAndResume()));
    for (const [i, { first, second }] of runs.entries()) {
      const all = finals([...first.messages, ...second.messages]);
      for (let k = 1; k < all.length; k++) {
        assert.ok(
          Math.abs(all[k].start - all[k - 1].end) < 1e-6,
          `run ${i}: final ${k} follows final ${k - 1} (${all[k - 1].end} → ${all[k].start})`,
        );
      }
      assert.ok(all.at(-1)!.end > 7, `run ${i}: the finals cover the whole stream`);
      assert.deepEqual(second.types().slice(-2), ['usage', 'ended']);
      assert.equal(
        first.types().filter((t) => t === 'usage').length + second.types().filter((t) => t === 'usage').length,
        1,
        'usage once',
      );
    }
    const rows = await endedLedgerSessions(stack, API);
    assert.equal(rows.length, runs.length, 'one ledger session per resumed dictation');
    assert.ok(
      rows.every((r) => r.outcome === 'ended' && !r.estimated),
      JSON.stringify(rows.map((r) => [r.outcome, r.estimated])),
    );
  });

  it('a resume key cannot be taken over by another tenant or subject', async () => {
    const key = randomBytes(18).toString('base64url');
    const { client: first } = await openConfigured(await resumableUrl(stack, { key }), configuration);
    first.ws.terminate();
    await delay(200);
    const r = await refusal(await resumableUrl(stack, { key, tenant: 'acme' }));
    assert.equal(r.status, 403);
    assert.equal(r.body.error.id, 'RESUME_FORBIDDEN');
    assert.equal((await refusal(await resumableUrl(stack, { key: 'short' }))).body.error.id, 'INVALID_RESUME_KEY');
  });

  it('a resuming socket with another config is denied, and the session stays resumable', async () => {
    const url = await resumableUrl(stack);
    const { client: first, accepted } = await openConfigured(url, configuration);
    first.ws.terminate();
    await delay(200);
    const wrong = await openClient(url);
    wrong.sendJson({ type: 'config', configuration: { primaryLanguage: 'da', audioFormat: 'audio/webm;codecs=opus' } });
    const denied = await wrong.next('CONFIG_DENIED');
    assert.match(denied.reason, /differs/);
    assert.equal((await wrong.closed).code, 4400);
    const { client: right, accepted: resumed } = await openConfigured(url, configuration);
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.sessionId, accepted.sessionId);
    assert.ok(
      !right.types().includes('CONFIG_DENIED'),
      'the denial went to the socket it was for, not to the next one',
    );
    right.sendJson({ type: 'end' });
    await right.next('ended', 10_000);
  });

  it('a client that does not come back: after the grace period its upstream session is ended and its usage is final', async () => {
    const before = (await ledgerSessions(stack, API)).length;
    const { client: c } = await openConfigured(await resumableUrl(stack), configuration);
    for (const chunk of chunks.slice(0, 8)) c.send(chunk);
    await delay(300);
    c.ws.terminate();
    await delay(1000);
    assert.equal(
      stack.emulator.sessions.at(-1)!.closed,
      false,
      'the upstream session waits for the client during the grace period',
    );
    let rows = await ledgerSessions(stack, API);
    for (let k = 0; k < 80 && (rows.length === before || rows.at(-1)!.end === null); k++)
      rows = await delay(100).then(() => ledgerSessions(stack, API));
    assert.equal(rows.at(-1)!.outcome, 'client_gone');
    assert.equal(rows.at(-1)!.estimated, false, 'the upstream session was ended: its usage is final');
  });
});

describe('a client that drops after its end', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '4', USAGE_API_TOKEN: API, RESUME_GRACE_SECONDS: '5' });
  });
  afterAll(() => stack.close());

  it('gets the finals, usage and end message it missed when it resumes, and the session is over once it has them', async () => {
    const url = await resumableUrl(stack);
    const { client: first } = await openConfigured(url, configuration);
    first.send(whole); // everything at once, paced upstream at 4× (about 2 s)
    first.sendJson({ type: 'end' });
    await delay(300);
    first.ws.terminate(); // dropped while the upstream is still transcribing
    await delay(2500); // the upstream has ended meanwhile

    const second = await openClient(url);
    second.sendJson({ type: 'config', configuration });
    const resumed = await second.next('CONFIG_ACCEPTED');
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.audioBytes, whole.length);
    second.sendJson({ type: 'end' }); // a client that resends its end: harmless
    await second.next('ended', 10_000);
    assert.equal((await second.closed).code, 1000);
    const all = finals([...first.messages, ...second.messages]);
    for (let k = 1; k < all.length; k++)
      assert.ok(Math.abs(all[k].start - all[k - 1].end) < 1e-6, `final ${k} follows final ${k - 1}`);
    assert.ok(all.at(-1)!.end > 7, 'every final, those sent while it was away included');
    assert.ok(
      !second.types().includes('error'),
      `no error: ${JSON.stringify(second.messages.filter((m) => m.type === 'error'))}`,
    );
    const row = (await ledgerSessions(stack, API)).at(-1)!;
    assert.equal(row.outcome, 'ended');
    assert.equal(row.estimated, false);
  });
});

describe('a client whose bytes were lost in flight', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '4', USAGE_API_TOKEN: API });
  });
  afterAll(() => stack.close());

  it('resumes as the vendor SDK does (queued audio first, then config): the stream goes on from the next cluster, the gap is counted', async () => {
    const url = await resumableUrl(stack);
    const { client: first } = await openConfigured(url, configuration);
    for (const chunk of chunks.slice(0, 10)) first.send(chunk);
    first.send(chunks[10].subarray(0, chunks[10].length >> 1)); // half of chunk 10 arrives...
    await delay(300);
    first.ws.terminate(); // ...the rest was in flight and never does

    const second = await openClient(url);
    for (const chunk of chunks.slice(11)) second.send(chunk); // mid-element bytes first
    second.sendJson({ type: 'config', configuration });
    const resumed = await second.next('CONFIG_ACCEPTED');
    assert.equal(resumed.resumed, true);
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    assert.equal((await second.closed).code, 1000);
    assert.deepEqual(
      second.messages.filter((m) => m.type === 'error'),
      [],
      'the lost bytes are skipped, not an error',
    );
    const all = finals([...first.messages, ...second.messages]);
    for (let k = 1; k < all.length; k++)
      assert.ok(all[k].end > all[k - 1].end, `final ${k} goes on after final ${k - 1}`);
    assert.ok(all.at(-1)!.end > 5, `the audio after the gap is transcribed (last final ends at ${all.at(-1)!.end})`);
    const gap = await metric(stack.gateway.server.adminPort, 'speech_gateway_resume_gap_bytes_total');
    assert.ok(gap > 0, `the skipped bytes are counted (${gap})`);
    assert.deepEqual(protocolViolations(stack.emulator), [], 'the upstream got a valid stream');
  });
});
