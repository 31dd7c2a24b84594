// A session's deadlines: the config must come within configTimeoutMs, and a /streams session ends
// after streamsMaxAgeMs. Both are cleared when the session ends or its socket closes.

export class SessionDeadlines {
  private timers: NodeJS.Timeout[] = [];

  /** maxAgeMs undefined: no age limit (/transcribe). */
  constructor(
    configTimeoutMs: number,
    onConfigTimeout: () => void,
    maxAgeMs: number | undefined,
    onMaxAge: () => void,
  ) {
    this.timers.push(setTimeout(onConfigTimeout, configTimeoutMs));
    if (maxAgeMs !== undefined) this.timers.push(setTimeout(onMaxAge, maxAgeMs));
  }

  /** The config came: its deadline is met (the age limit stays). */
  configReceived(): void {
    clearTimeout(this.timers[0]);
  }

  clear(): void {
    for (const t of this.timers) clearTimeout(t);
  }
}
