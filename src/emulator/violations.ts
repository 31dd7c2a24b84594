// The rules one session's client broke, written to the emulator's bounded log of violations with
// the session's label.
import { MAX_LOG_ENTRIES, pushRecent } from './session-window.js';

export class ClientViolations {
  private reported = new Set<string>();

  constructor(
    private log: string[],
    private label: string,
  ) {}

  add(text: string): void {
    pushRecent(this.log, `${this.label}: ${text}`, MAX_LOG_ENTRIES);
  }

  /** For rules a client breaks on every frame once it breaks them at all: one entry per session. */
  once(text: string): void {
    if (this.reported.has(text)) return;
    this.reported.add(text);
    this.add(text);
  }
}
