// Finals at the seam of a replaced upstream session. The replay to the new upstream session starts at
// the Opus packet that holds the end of the last final the client has, not at the WebM Cluster or Ogg
// page around it: the next final overlaps its predecessor by less than one packet (at most 60 ms),
// whatever the client's Cluster or page length. Real sockets: ws client → uWS gateway → emulator,
// whose upstream sessions are dropped mid-dictation, after a flush (a final ending between whole
// seconds) and without one. Streams: Chromium's live WebM (60 ms packets, 0.3 s Clusters), WebM with
// 5 s Clusters and Ogg with 1.3 s pages, both made here by ffmpeg from the opusenc fixture.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { run } from '../audio-transcode/ogg-check.js';
import { chromeChunks, evenChunks, FIXTURES } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';
import { finals, type Final } from '../support/transcripts.js';
import { endedLedgerSessions } from '../support/usage-api.js';
import { delay } from '../support/wait.js';

const API = 'seam-usage-token';
/** The longest Opus packet the streams here carry (Chromium's); a seam may overlap by less. */
const PACKET = 0.06;

/** Finals one after another: none starts later than its predecessor's end (no gap) nor more than a packet before it. */
function assertSeams(f: Final[], until: number, label: string): void {
  assert.ok(f.length > 3, `${label}: finals arrived (${f.length})`);
  for (let i = 1; i < f.length; i++) {
    const overlap = f[i - 1].end - f[i].start;
    const seam = `${label}: final ${i - 1} ${f[i - 1].start}-${f[i - 1].end}, final ${i} ${f[i].start}-${f[i].end}`;
    assert.ok(f[i].end > f[i - 1].end, `${seam}: each ends later`);
    assert.ok(overlap <= PACKET + 1e-6, `${seam}: overlap ${overlap.toFixed(3)} s, more than one packet`);
    assert.ok(overlap >= -0.01, `${seam}: a gap of ${(-overlap).toFixed(3)} s`);
  }
  assert.ok(f.at(-1)!.end > until, `${label}: the finals cover the audio (last ends at ${f.at(-1)!.end})`);
}

describe('the seam of a replaced upstream session', () => {
  let stack: Stack;
  let dir: string;
  let webm5s: Buffer;
  let ogg13: Buffer;
  beforeAll(async () => {
    stack = await startStack({ PACE: '4', USAGE_API_TOKEN: API });
    dir = await mkdtemp(join(tmpdir(), 'seam-'));
    const source = join(FIXTURES, 'dictation.ogg');
    await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-i',
      source,
      '-c:a',
      'copy',
      '-f',
      'webm',
      '-cluster_time_limit',
      '5000',
      '-cluster_size_limit',
      '10000000',
      join(dir, 'c5.webm'),
    ]);
    await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-i',
      source,
      '-c:a',
      'copy',
      '-f',
      'ogg',
      '-page_duration',
      '1300000',
      join(dir, 'p13.ogg'),
    ]);
    webm5s = await readFile(join(dir, 'c5.webm'));
    ogg13 = await readFile(join(dir, 'p13.ogg'));
  });
  afterAll(async () => {
    await stack?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Drops the upstream session and waits for its replacement, so that each drop is a seam of its own
   *  (on a busy machine a drop could otherwise land while the last one is still being replaced). */
  async function dropAndAwaitReplacement(tenant: string): Promise<void> {
    const count = () => stack.emulator.sessions.filter((s) => s.tenant === tenant).length;
    const before = count();
    stack.emulator.dropAllSessions();
    for (let t = 0; t < 200 && count() === before; t++) await delay(50);
  }

  /** Streams `chunks` (every `everyMs`) on `tenant`; after each piece in `flushAt` a flush, then, once it
   *  is answered, the upstream session is dropped; after each piece in `dropAt` it is dropped at once. */
  async function dictate(
    tenant: string,
    audioFormat: string,
    chunks: Buffer[],
    everyMs: number,
    flushAt: number[],
    dropAt: number[],
  ) {
    const c = await stack.connect('transcribe', { tenant });
    c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat } });
    await c.next('CONFIG_ACCEPTED');
    for (const [i, chunk] of chunks.entries()) {
      c.send(chunk);
      if (flushAt.includes(i)) {
        c.sendJson({ type: 'flush' });
        await c.next('flushed', 20_000);
        await dropAndAwaitReplacement(tenant);
      }
      if (dropAt.includes(i)) await dropAndAwaitReplacement(tenant);
      await delay(everyMs);
    }
    c.sendJson({ type: 'end' });
    const usage = await c.next('usage', 30_000);
    await c.next('ended', 10_000);
    assert.deepEqual(
      c.messages.filter((m) => m.type === 'error'),
      [],
      `${tenant}: no error`,
    );
    const upstream = stack.emulator.sessions.filter((s) => s.tenant === tenant);
    assert.ok(upstream.length >= 1 + flushAt.length + dropAt.length, `${tenant}: ${upstream.length} upstream sessions`);
    return { c, usage };
  }

  it("Chromium's live WebM (0.3 s Clusters): finals overlap by less than one packet", async () => {
    const { c } = await dictate(
      'seam-chrome',
      'audio/webm;codecs=opus',
      chromeChunks('webm-opus'),
      80,
      [7, 17],
      [12, 24],
    );
    assertSeams(finals(c.messages), 7, 'chrome');
  });

  it('WebM with 5 s Clusters (ffmpeg): finals overlap by less than one packet', async () => {
    const { c } = await dictate(
      'seam-webm5',
      'audio/webm;codecs=opus',
      evenChunks(webm5s, 2000),
      150,
      [4, 17],
      [10, 24],
    );
    assertSeams(finals(c.messages), 25, 'webm 5 s clusters');
  });

  it('Ogg with 1.3 s pages (ffmpeg): finals overlap by less than one packet', async () => {
    const { c } = await dictate('seam-ogg', 'audio/ogg', evenChunks(ogg13, 2000), 150, [6], [12, 20, 27]);
    assertSeams(finals(c.messages), 25, 'ogg 1.3 s pages');
  });

  it("after reconnections, the client's final usage is the session's, as the ledger has it", async () => {
    const tenant = 'seam-usage';
    const { usage } = await dictate(tenant, 'audio/webm;codecs=opus', chromeChunks('webm-opus'), 80, [9], [18]);
    const rows = await endedLedgerSessions(stack, API, { tenant });
    assert.equal(rows.length, 1);
    assert.ok(rows[0].segments.length >= 3, `${rows[0].segments.length} segments`);
    assert.ok(
      Math.abs(usage.credits - rows[0].credits) < 1e-6,
      `the client was told ${usage.credits}, the ledger has ${rows[0].credits}`,
    );
  });
});
