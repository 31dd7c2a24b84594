// Everything the process writes to stdout (the log's lines, and without AUDIT_LOG_FILE the audit
// trail's) goes through one queue of at most LOG_QUEUE_BYTES, written by one writer so lines never
// interleave. A reader that stops reading (a stuck log shipper, a full pipe) then holds at most that
// much of the process's memory: past it a line is dropped and counted, an audit line by the caller
// (speech_gateway_audit_write_failures_total{sink="log"}), a log line here
// (speech_gateway_log_lines_dropped_total). The writer is pino's own (sonic-boom): non-blocking, a full
// pipe retried every 100 ms. Read at import, as LOG_LEVEL is (config.ts validates the setting).
import { destination } from 'pino';
import { metrics } from './metrics.js';

export const LOG_QUEUE_DEFAULT = 4 * 1024 * 1024;
export const LOG_QUEUE_MIN = 64 * 1024;
export const LOG_QUEUE_MAX = 1024 * 1024 * 1024;
/** How long the exit waits for a stalled reader before it gives up on what is still queued. */
const EXIT_FLUSH_MS = 1000;

const fromEnv = Number(process.env.LOG_QUEUE_BYTES);
const maxLength =
  Number.isInteger(fromEnv) && fromEnv >= LOG_QUEUE_MIN && fromEnv <= LOG_QUEUE_MAX ? fromEnv : LOG_QUEUE_DEFAULT;

let exitBy = Infinity;
// Before the queue exists, so this runs before pino's own flush at exit: the reader gets a second to
// take what is queued; if it does not, what is left is lost (counted) and the exit goes on.
process.once('exit', () => {
  exitBy = Date.now() + EXIT_FLUSH_MS;
  try {
    stdoutQueue.flushSync();
  } catch {
    metrics.logLinesDropped.inc();
    stdoutQueue.flushSync = () => undefined;
  }
});

export const stdoutQueue = destination({
  dest: 1,
  sync: false,
  maxLength,
  retryEAGAIN: () => Date.now() < exitBy,
});

let dropped = 0;
let own = false;
let broken = false;
stdoutQueue.on('drop', () => {
  dropped++;
  if (!own) metrics.logLinesDropped.inc();
});
// Stdout failed for good (its reader closed the pipe: EPIPE, or another write error): pino stops
// writing to it; every line from then on is lost, and counted, and the process goes on.
stdoutQueue.on('error', () => {
  broken = true;
  stdoutQueue.write = () => {
    if (!own) metrics.logLinesDropped.inc();
    return true;
  };
});

/** Queues one line (with its newline); false when it was dropped: the queue is full, or stdout failed. */
export function writeStdoutLine(line: string): boolean {
  if (broken) return false;
  const before = dropped;
  own = true;
  try {
    stdoutQueue.write(line);
  } finally {
    own = false;
  }
  return dropped === before;
}
