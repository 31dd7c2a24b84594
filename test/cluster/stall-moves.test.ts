// A stall after a move: a session handed over (its replica drained) or taken over (its replica
// killed) whose new upstream session on the other replica stops transcribing while it answers is
// replaced there within STALL_SPEECH_SECONDS of speech plus 5 s: every final once, on one timeline
// across both replicas, the session's coverage (both replicas' speech: one session, one account) at
// least 99%, the stall counted on the replica that saw it. Two real replicas, one redis-server, the
// emulator's transcript faults, the fixture's speech as Chromium encodes it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { encode, ENCODINGS, fixtureSpeech, writeWav } from '../audio/speech/labelled.js';
import { openWhenReady, startCluster, type Cluster } from '../support/cluster.js';
import { metric } from '../support/metrics.js';
import { endpointPath, openConfigured, type TestClient } from '../support/stack.js';
import { finals } from '../support/transcripts.js';
import { delay } from '../support/wait.js';

const STALL_S = 10;
const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };

describe('a stall after the session moved to another replica', () => {
  let cluster: Cluster;
  let whole: Buffer;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sgw-stall-moves-'));
    writeWav(await fixtureSpeech(), join(dir, 'speech.wav'));
    whole = await encode(join(dir, 'speech.wav'), ENCODINGS[0], join(dir, 'speech.webm'));
    // Near real time: the watch gives the recogniser 2 s of wall time to answer what it was sent.
    cluster = await startCluster(2, { PACE: '1.5', STALL_SPEECH_SECONDS: String(STALL_S), RESUME_GRACE_SECONDS: '20' });
  }, 60_000);
  afterEach(() => cluster.emulator.resetFaults());
  afterAll(() => cluster?.close());

  const url = (i: number, tenant: string, key: string) => async () => {
    const token = await cluster.emulator.issueToken({ tenant, scope: 'openid transcribe' });
    const q = new URLSearchParams({ 'tenant-name': tenant, token: `Bearer ${token}`, resume: key, notices: 'true' });
    return `ws://127.0.0.1:${cluster.replicas[i].port}${endpointPath('transcribe')}?${q}`;
  };

  /** Pieces of 4000 bytes (0.25 s) every 160 ms, as a live client at PACE 1.5, from `from` to `to`. */
  async function stream(c: TestClient, from: number, to: number): Promise<void> {
    for (let at = from; at < to && c.ws.readyState === c.ws.OPEN; at += 4000) {
      c.send(whole.subarray(at, Math.min(at + 4000, to)));
      await delay(160);
    }
  }

  for (const move of ['handed over', 'taken over'] as const)
    it(`${move}: the new upstream session's stall is replaced; one timeline; coverage ≥ 99% of the whole session`, async () => {
      await cluster.allUp();
      const tenant = `stall-${move.split(' ')[0]}`;
      const key = randomBytes(18).toString('base64url');
      const { client: first } = await openConfigured(await url(0, tenant, key)(), configuration);
      await stream(first, 0, Math.floor(whole.length * 0.4));
      await delay(2500); // its finals are in, its record written
      if (move === 'handed over')
        await cluster.stop(0); // its upstream session ended with the drain
      else await cluster.kill(0);
      await first.closed;
      await delay(300); // the emulator has seen the dead replica's connection go
      // The next upstream session (the successor's) answers, but transcribes nothing.
      cluster.emulator.faults.stopTranscribing = { afterMediaSeconds: 0, sessions: 1 };
      const { client: second, accepted } = await openWhenReady(url(1, tenant, key), configuration, 60);
      assert.equal(accepted.resumed, true);
      await stream(second, accepted.audioBytes, whole.length);
      second.sendJson({ type: 'end' });
      await second.next('ended', 30_000);
      assert.equal(cluster.emulator.faultCounts.stoppedSessions, 1);
      assert.equal(
        await metric(cluster.replicas[1].adminPort, 'speech_gateway_upstream_failures_total{cause="stalled"}'),
        move === 'handed over' ? 1 : 2,
        'counted on the replica that saw it (this file runs the handover first)',
      );
      const all = finals([...first.messages, ...second.messages]);
      // Across the move and the replay the next final starts within a packet (60 ms) of the last one's end.
      for (let k = 1; k < all.length; k++)
        assert.ok(
          Math.abs(all[k].start - all[k - 1].end) < 0.06,
          `final ${k} follows ${k - 1} once: ${JSON.stringify(all)}`,
        );
      assert.ok(all[0].start < 1e-6 && all.at(-1)!.end > 25, `the whole dictation: ${JSON.stringify(all)}`);
      const cov = second.messages.find((m) => m.type === 'notice' && m.notice.id === 'TRANSCRIPT_COVERAGE')!.notice
        .coverage;
      assert.ok(cov.speechSeconds > 20, `the speech of both replicas: ${JSON.stringify(cov)}`);
      assert.ok(cov.transcribedSpeechSeconds / cov.speechSeconds >= 0.99, JSON.stringify(cov));
    }, 120_000);
});
