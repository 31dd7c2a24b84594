// What Redis itself counts, read before and after the measured window: INFO commandstats (calls per
// command: EVALSHA and every command its Lua ran are each counted), INFO stats (bytes in and out of
// the network), and a MONITOR over the window to tell which calls came from clients (top-level) and
// which from inside scripts (MONITOR marks those "lua").
import { Redis } from 'ioredis';

export interface Snapshot {
  calls: Record<string, number>;
  netIn: number;
  netOut: number;
  usedMemory: number;
}

function fields(info: string): Record<string, string> {
  return Object.fromEntries(
    info
      .split('\r\n')
      .filter((l) => l.includes(':') && !l.startsWith('#'))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
  );
}

export async function snapshot(redis: Redis): Promise<Snapshot> {
  // One INFO each for what it reads; the bench's own INFO calls are left out of the counts below.
  const cmds = fields(await redis.info('commandstats'));
  const stats = fields(await redis.info('stats'));
  const memory = fields(await redis.info('memory'));
  const calls: Record<string, number> = {};
  for (const [k, v] of Object.entries(cmds)) {
    if (k.startsWith('cmdstat_')) calls[k.slice(8)] = Number(/calls=(\d+)/.exec(v)?.[1] ?? 0);
  }
  return {
    calls,
    netIn: Number(stats.total_net_input_bytes),
    netOut: Number(stats.total_net_output_bytes),
    usedMemory: Number(memory.used_memory),
  };
}

/** Calls per command between two snapshots, without the bench's own (info, monitor, …). */
export function callsBetween(a: Snapshot, b: Snapshot, own: Set<string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of Object.entries(b.calls)) {
    const d = n - (a.calls[k] ?? 0);
    if (d > 0 && !own.has(k)) out[k] = d;
  }
  return out;
}

/** Counts commands seen by MONITOR until stopped: `top` from clients, `lua` run by scripts. */
export async function monitorSplit(redis: Redis) {
  const top: Record<string, number> = {};
  const lua: Record<string, number> = {};
  const monitor = await redis.monitor();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const cmd = String(args[0]).toLowerCase();
    const into = source === 'lua' ? lua : top;
    into[cmd] = (into[cmd] ?? 0) + 1;
  });
  return {
    async stop() {
      monitor.disconnect();
      return { top, lua };
    },
  };
}

/** Session records (sgw:rec:*): how many, and MEMORY USAGE and value bytes of up to `sample`. */
async function scanAll(redis: Redis, match: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

const mean = (xs: Array<number | null>) => xs.reduce<number>((s, x) => s + (x ?? 0), 0) / Math.max(1, xs.length);

/** What a session keeps in Redis: its record, its position, its ledger hash (kept for the retention). */
export async function recordSizes(redis: Redis, sample: number) {
  const keys = (await scanAll(redis, 'sgw:rec:*')).filter((k) => k !== 'sgw:rec-deadlines');
  const picked = keys.slice(0, sample);
  const memory = await Promise.all(picked.map((k) => redis.memory('USAGE', k)));
  const bytes = await Promise.all(picked.map((k) => redis.strlen(k).catch(() => 0)));
  const ledger = (await scanAll(redis, 'sg:usage:s:*')).slice(0, sample);
  const ledgerMemory = await Promise.all(ledger.map((k) => redis.memory('USAGE', k)));
  let positionFields = 0;
  let positionMemory = 0;
  for (const k of await scanAll(redis, 'sgw:pos:*')) {
    positionFields += await redis.hlen(k);
    positionMemory += (await redis.memory('USAGE', k)) ?? 0;
  }
  const allKeys = await redis.dbsize();
  return {
    keys: keys.length,
    allKeys,
    sampled: picked.length,
    memoryUsage: mean(memory),
    valueBytes: mean(bytes),
    ledgerMemoryUsage: mean(ledgerMemory),
    positionBytes: positionMemory / Math.max(1, positionFields),
  };
}
