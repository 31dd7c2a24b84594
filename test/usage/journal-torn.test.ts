// The usage journal on a disk that fills up, and after a write cut short: it never holds a
// partial record that a replay could misread (each record is a whole line with its checksum, a
// failed write is cut back to the last whole record, a torn tail is cut at start), and the drop
// count is exact: every event is either replayed once or counted as dropped, never both.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { metrics } from '../../src/telemetry/index.js';
import { createUsage, type UsageOptions } from '../../src/usage/index.js';
import { Journal } from '../../src/usage/journal.js';
import type { LedgerEvent } from '../../src/usage/model.js';
import { TOKEN, get, tempDir, uniquePrefix } from '../support/usage.js';
import { until } from '../support/wait.js';
import { startRedis, type TestRedis } from './redis.js';

const DAY = 86_400_000;
const T0 = Math.floor(Date.now() / DAY) * DAY - DAY + 3_600_000; // yesterday 01:00 UTC
const JOURNAL = 'usage-journal.jsonl';
const dropped = async () => (await metrics.journalDropped.get()).values[0]?.value ?? 0;

/** A 64 KiB tmpfs at a fresh directory, or null where mounting is not allowed (not root). */
function smallDisk(): string | null {
  const dir = tempDir();
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    return null;
  }
  process.once('exit', () => {
    try {
      execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  });
  return dir;
}

const disk = smallDisk();

describe('a full disk', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
    if (disk) execFileSync('umount', ['-l', disk]);
  });

  test.skipIf(!disk)(
    'events either reach Redis through the journal or are counted as dropped, and the journal never holds a cut line',
    async () => {
      const dir = join(disk!, 'journal');
      const filler = join(disk!, 'filler');
      writeFileSync(filler, Buffer.alloc(16 * 1024)); // freed later: the disk gets room again
      const options: UsageOptions = {
        redis: { url: redis.url },
        journalDir: dir,
        keyPrefix: uniquePrefix(),
        retentionDays: 30,
        maxSessionsPerTenant: 0,
        apiToken: TOKEN,
        connectTimeoutMs: 500,
      };
      await redis.stop();
      const u = await createUsage(options);
      const before = await dropped();
      const N = 1500; // about 170 KB of records for 48 KiB of free space
      u.ledger.sessionStarted({ sessionKey: 'fd', tenant: 'acme', endpoint: 'transcribe', startedAt: T0 });
      for (let seq = 1; seq <= N; seq++)
        u.ledger.recordUsage({ sessionKey: 'fd', seq, kind: 'delta', credits: 0.001, at: T0 });
      await u.ledger.flush();
      const text = () => readFileSync(join(dir, JOURNAL), 'utf8');
      const lines = () => text().split('\n').filter(Boolean).length;
      assert.ok(text().endsWith('\n'), 'the journal ends with a whole record');
      const depth = u.ledger.journalDepth;
      assert.ok(depth > 100 && depth < N, `the disk filled part way (${depth} events journaled)`);
      assert.equal(lines(), depth, 'every journaled event is one whole line');
      assert.equal((await dropped()) - before, N + 1 - depth, 'dropped = events not journaled, exactly');

      // Room again: new events go on after the last whole record.
      rmSync(filler);
      for (let seq = N + 1; seq <= N + 50; seq++)
        u.ledger.recordUsage({ sessionKey: 'fd', seq, kind: 'delta', credits: 0.001, at: T0 });
      u.ledger.sessionEnded({ sessionKey: 'fd', outcome: 'ended', mediaSeconds: 1, endedAt: T0 + 1000 });
      await u.ledger.flush();
      assert.equal(u.ledger.journalDepth, depth + 51);
      assert.equal(lines(), depth + 51);
      assert.equal((await dropped()) - before, N + 1 - depth, 'nothing more dropped');

      await redis.restart();
      await until(() => u.ledger.journalDepth === 0, 'journal replay');
      const sessions = (await get(u.api, '/v1/usage/sessions?tenant=acme')).body.sessions;
      // The start and the end made it; every delta in the journal counted once (depth - 1 of the first ones, 50 later ones).
      assert.equal(sessions.length, 1);
      assert.equal(sessions[0].outcome, 'ended');
      assert.equal(sessions[0].credits, Number(((depth - 1 + 50) * 0.001).toFixed(6)));
      await u.close();
    },
  );
});

describe('a write cut short (a crash mid-record)', () => {
  const limits = { maxEvents: 1000, maxBytes: 1 << 20 };
  const usage = (seq: number, micro = 1000): LedgerEvent => ({
    t: 'usage',
    k: 'c1',
    seq,
    seg: 0,
    kind: 'delta',
    micro,
    at: T0,
  });

  test('a torn tail is cut at start: later records are read whole, the torn one is not read at all', async () => {
    const dir = tempDir();
    const file = join(dir, JOURNAL);
    const first = await Journal.open(dir, limits);
    assert.equal(await first.append([usage(1), usage(2), usage(3)]), 0);
    const size = readFileSync(file).length;
    truncateSync(file, size - 7); // the third record loses its end, as a crash mid-write leaves it
    await first.close(); // the directory's lock given back: the next process may open it

    const second = await Journal.open(dir, limits);
    assert.equal(second.depth, 2);
    assert.ok(readFileSync(file, 'utf8').endsWith('\n'), 'the cut record is gone from the file');
    assert.equal(await second.append([usage(4)]), 0);
    assert.deepEqual(
      (await second.readAll()).map((e) => (e as { seq: number }).seq),
      [1, 2, 4],
    );
  });

  test('a record changed on disk fails its checksum and is skipped, not replayed with the wrong figure', async () => {
    const dir = tempDir();
    const file = join(dir, JOURNAL);
    const j = await Journal.open(dir, limits);
    await j.append([usage(1, 1000), usage(2, 1000), usage(3, 1000)]);
    await j.close();
    // Still valid JSON after the change: only the checksum can tell.
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace(
        '"seq":2,"seg":0,"kind":"delta","micro":1000',
        '"seq":2,"seg":0,"kind":"delta","micro":9000',
      ),
    );
    const reopened = await Journal.open(dir, limits);
    assert.deepEqual(
      (await reopened.readAll()).map((e) => [(e as { seq: number }).seq, (e as { micro: number }).micro]),
      [
        [1, 1000],
        [3, 1000],
      ],
    );
    assert.equal(reopened.depth, 2);
  });

  test('lines of the format before checksums (JSON only) are still read', async () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, JOURNAL),
      [usage(1), usage(2)].map((e) => JSON.stringify(e) + '\n').join('') + '{"t":"usage","k":"c1","se',
    );
    const j = await Journal.open(dir, limits);
    assert.equal(j.depth, 2);
    await j.append([usage(3)]);
    assert.deepEqual(
      (await j.readAll()).map((e) => (e as { seq: number }).seq),
      [1, 2, 3],
    );
  });
});
