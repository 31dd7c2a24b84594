// Where every audit event is written as it happens: JSON lines appended to AUDIT_LOG_FILE (created
// 0600 in a 0700 directory), or stdout with "stream":"audit" so a log shipper can route the lines
// apart from the pino log. Writes to the file are synchronous: events are few (a handful per session,
// repeats folded), the file then holds each before the next step, and a failure is seen here, where
// it is counted. Stdout is a pipe whose reader may stall: its lines wait in a bounded queue.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeStdoutLine } from '../telemetry/index.js';
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

/** Through the process's one stdout queue (telemetry/stdout.ts): a line it has no room for throws,
 * so the trail counts it. */
export function stdoutSink(): AuditSink {
  return {
    write: (e) => {
      if (!writeStdoutLine(`${JSON.stringify({ stream: 'audit', ...e })}\n`))
        throw new Error('stdout is read too slowly: LOG_QUEUE_BYTES are waiting for it; the line is dropped');
    },
    close: () => undefined,
  };
}
