// Where every audit event is written as it happens: JSON lines appended to AUDIT_LOG_FILE (created
// 0600 in a 0700 directory), or stdout with "stream":"audit" so a log shipper can route the lines
// apart from the pino log. Writes are synchronous: events are few (a handful per session), the file
// then holds each before the next step, and a failure is seen here, where it is counted.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AuditEvent } from './event.js';

export interface AuditSink {
  write(e: AuditEvent): void;
  close(): void;
}

export function fileSink(path: string): AuditSink {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const fd = openSync(path, 'a', 0o600);
  return {
    write: (e) => void writeSync(fd, `${JSON.stringify(e)}\n`),
    close: () => closeSync(fd),
  };
}

export function stdoutSink(): AuditSink {
  return {
    write: (e) => void process.stdout.write(`${JSON.stringify({ stream: 'audit', ...e })}\n`),
    close: () => undefined,
  };
}
