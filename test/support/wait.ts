// Test support: waiting in real time, for a fixed while or until something holds.
import type { ChildProcess } from 'node:child_process';

/** Waits `ms`; none when it is negative (a caller already behind its schedule), without Node's warning. */
export const delay = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Polls `check` every `everyMs` until it is truthy; fails naming `what` after `withinMs`. The default
 *  deadline is generous: it only stops a broken test hanging. A shorter one is part of what a test checks. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  o: { withinMs?: number; everyMs?: number } = {},
): Promise<void> {
  const { withinMs = 20_000, everyMs = 50 } = o;
  const end = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (${withinMs} ms)`);
    await delay(everyMs);
  }
}

/** The first match of `re` in a process's output (`getText()`, polled every 50 ms) within `ms`. With
 *  `child`, fails at once when that process exits first (a missing module, say). */
export function waitForOutput(
  getText: () => string,
  re: RegExp,
  ms: number,
  child?: ChildProcess,
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      const m = getText().match(re);
      if (m) return resolve(m);
      if (child && child.exitCode !== null)
        return reject(new Error(`exited ${child.exitCode} before ${re}; output:\n${getText()}`));
      if (Date.now() - started > ms) return reject(new Error(`timed out waiting for ${re}; output:\n${getText()}`));
      setTimeout(tick, 50);
    };
    tick();
  });
}
