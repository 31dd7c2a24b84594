// One usage journal directory, two gateway processes (one volume mounted into two containers, or
// the default directory under one working directory): the journal belongs to one process. The
// second gateway refuses to start, naming USAGE_JOURNAL_DIR, and the first bills every session,
// Redis away or not. A lock left by a killed gateway does not stop the next start on the directory,
// which replays what the killed one journaled. Real processes, a real redis-server; then the lock's
// rules for a holder this process cannot see (another container or host), in process.
import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'vitest';
import { fixture } from '../support/fixtures.js';
import { emulatorToken, startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { openClient } from '../support/stack.js';
import { ledgerSessionsAt } from '../support/usage-api.js';
import { tempDir } from '../support/usage.js';
import { until } from '../support/wait.js';
import { Journal } from '../../src/usage/journal.js';
import { startRedis, type TestRedis } from './redis.js';

const API_TOKEN = 'journal-lock-usage-token';
const ogg = fixture('dictation.ogg');

let redis: TestRedis;
const started: GatewayProcess[] = [];

/** A gateway on `journal` with the test's Redis; stopped after the test. */
async function gateway(journal: string): Promise<GatewayProcess> {
  const g = await startGatewayProcess(tempDir(), {
    REDIS_URL: redis.url,
    USAGE_API_TOKEN: API_TOKEN,
    USAGE_JOURNAL_DIR: journal,
    PACE: '50',
  });
  started.push(g);
  return g;
}

/** A whole dictation of tenant "base": the credits its client was billed (its `usage` message). */
async function dictation(g: GatewayProcess): Promise<number> {
  const token = await emulatorToken(g.authBase);
  const q = new URLSearchParams({ 'tenant-name': 'base', token: `Bearer ${token}` });
  const c = await openClient(`ws://127.0.0.1:${g.port}/audio-bridge/v2/transcribe?${q}`);
  c.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' } });
  await c.next('CONFIG_ACCEPTED');
  for (let off = 0; off < ogg.length; off += 8000) c.send(ogg.subarray(off, off + 8000));
  c.sendJson({ type: 'end' });
  const usage = await c.next('usage', 30_000);
  assert.equal((await c.closed).code, 1000);
  return usage.credits as number;
}

/** Waits until the ledger (read through `g`) holds `sessions` ended sessions; their credits, summed. */
async function ledgerCredits(g: GatewayProcess, sessions: number): Promise<number> {
  let rows: { end: string | null; credits: number }[] = [];
  await until(async () => {
    // Redis back a moment ago: the usage API may still answer 503.
    const all = await ledgerSessionsAt(g.adminPort, API_TOKEN, 'base').catch(() => []);
    rows = all.filter((r) => r.end !== null);
    return rows.length >= sessions;
  }, `${sessions} ended sessions in the ledger`);
  return Number(rows.reduce((sum, r) => sum + r.credits, 0).toFixed(6));
}

const sum = (xs: number[]) => Number(xs.reduce((a, b) => a + b, 0).toFixed(6));

describe('one usage journal directory, two gateway processes', () => {
  // A Redis of its own for each test: its ledger holds that test's sessions only.
  beforeEach(async () => {
    redis = await startRedis({ persist: true });
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((g) => g.stop()));
    await redis?.stop();
  });

  it('the second refuses to start, naming USAGE_JOURNAL_DIR; the first bills every session, Redis away or not', async () => {
    const journal = join(tempDir(), 'journal');
    const first = await gateway(journal);
    const second = await gateway(journal).then(
      () => 'started',
      (err: Error) => err.message,
    );
    assert.match(second, /^the gateway exited \(1\)/, 'the second gateway does not start');
    assert.match(second, /USAGE_JOURNAL_DIR/, 'and says which setting to change');

    const billed = [await dictation(first)];
    await redis.stop();
    billed.push(await dictation(first), await dictation(first));
    await redis.restart();
    assert.equal(await ledgerCredits(first, billed.length), sum(billed), 'every billed credit reached the ledger');
  });

  it('a lock left by a killed gateway does not stop the next start, which replays its journal', async () => {
    const journal = join(tempDir(), 'journal');
    const first = await gateway(journal);
    await redis.stop();
    const billed = [await dictation(first), await dictation(first)];
    // Killed once both sessions' ends are on disk: its lock stays behind, and its journal with them.
    const ends = () => readFileSync(join(journal, 'usage-journal.jsonl'), 'utf8').split('"t":"end"').length - 1;
    await until(() => ends() === billed.length, 'both sessions journaled to their end');
    await first.kill();
    await redis.restart();
    const next = await gateway(journal);
    assert.equal(await ledgerCredits(next, billed.length), sum(billed), 'the killed gateway’s sessions replayed');
  });
});

describe('the journal directory lock, for a holder in another container or on another host', () => {
  const limits = { maxEvents: 10, maxBytes: 1 << 20, lock: { heartbeatMs: 100, staleMs: 1000 } };
  /** A lock as a gateway elsewhere writes it: a pid this process cannot see. */
  const foreignLock = (dir: string) => {
    const file = join(dir, 'usage-journal.lock');
    const holder = { pid: 1, machine: 'other-host|boot|pid:[1]', token: 'theirs', since: new Date().toISOString() };
    writeFileSync(file, JSON.stringify(holder));
    return file;
  };

  it('one it keeps touching is refused, naming USAGE_JOURNAL_DIR', async () => {
    const dir = tempDir();
    const file = foreignLock(dir);
    const touching = setInterval(() => utimesSync(file, new Date(), new Date()), 100);
    try {
      await assert.rejects(
        Journal.open(dir, limits),
        /USAGE_JOURNAL_DIR.*held by another gateway process \(pid 1 on other-host/,
      );
    } finally {
      clearInterval(touching);
    }
  });

  it('one left untouched past the stale period is taken over', async () => {
    const dir = tempDir();
    foreignLock(dir);
    const j = await Journal.open(dir, limits);
    assert.equal(await j.append([{ t: 'refused', k: 's', at: 0 }]), 0, 'the journal takes events');
    await j.close();
  });

  it('a second journal on the directory in this process is refused until the first is closed', async () => {
    const dir = tempDir();
    const first = await Journal.open(dir, limits);
    await assert.rejects(Journal.open(dir, limits), /USAGE_JOURNAL_DIR.*held by this process already/);
    await first.close();
    await (await Journal.open(dir, limits)).close();
  });
});
