// Client resume: a client that connects with `resume=<key>` can drop and come back within
// RESUME_GRACE_SECONDS; meanwhile its session and upstream session go on, and what it misses is kept
// here (bounded) for the socket that takes the session over.

/** Output kept for a detached client; past it the session stops waiting for the client. */
export const MAX_MISSED_BYTES = 1024 * 1024;

/** Messages a detached client misses, in order, each to be sent once to the socket that resumes. */
export class MissedOutput {
  private messages: Array<string | Buffer> = [];
  private bytes = 0;

  /** false: over the bound (nothing more is kept; the client is given up). */
  push(message: string | Buffer): boolean {
    this.bytes += message.length;
    if (this.bytes > MAX_MISSED_BYTES) return false;
    this.messages.push(message);
    return true;
  }

  take(): Array<string | Buffer> {
    const out = this.messages;
    this.messages = [];
    this.bytes = 0;
    return out;
  }
}

/** Key order does not matter: a client may serialise its config differently the second time. */
export function sameConfig(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)))
      : x,
  );
}
