// Native code in the process (uWebSockets.js) writes plain-text lines to file descriptor 2 with
// std::cerr: one "Warning: uWS.HttpResponse writes must be made from within a corked callback" per
// socket accepted after an await (server/accept.ts says why the gateway does that). The library has
// no switch for it (no environment variable or option), and JavaScript cannot reach those writes.
// So production output stays JSON lines: at start, descriptor 2 becomes the write end of a FIFO
// this process reads, and each line it carries is logged through the logger (the known uWS warning
// at debug, anything else at warn). The FIFO is non-blocking on both ends: a writer never waits on
// the reader in the same thread (a burst past the pipe's buffer in one event-loop turn is dropped,
// not deadlocked). At exit, what is left is logged and descriptor 2 points at the original stderr
// again, so what Node prints about a crash (after 'exit') is not lost. That needs the original
// reopened through /proc/self/fd/2, which works for what container runtimes give (a FIFO), a pipe,
// a file or a terminal, not for a socket (systemd's journal, a Node parent's 'pipe'): there stderr
// is left as it is.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logger } from './logger.js';

const UWS_CORK_WARNING = /^Warning: uWS\.HttpResponse writes must be made from within a corked callback/;

/** Logs one line native code wrote to stderr. */
function logLine(line: string): void {
  if (line.trim() === '') return;
  if (UWS_CORK_WARNING.test(line)) logger.debug({ event: 'native_stderr' }, line);
  else logger.warn({ event: 'native_stderr' }, line);
}

/** Splits a byte stream into lines, keeping a partial last line for the next chunk. */
function lineSplitter(): (chunk: string) => void {
  let rest = '';
  return (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    lines.forEach(logLine);
  };
}

/** Where stderr went before the capture (2 until then). */
let originalStderr = 2;

/** Writes a JSON line where stderr went before the capture: for what must be seen whatever LOG_LEVEL is. */
export function writeStderrJson(level: string, msg: string): void {
  const line = JSON.stringify({ level, time: new Date().toISOString(), service: 'speech-gateway', msg });
  writeSync(originalStderr, `${line}\n`);
}

const isOpen = (fd: number): boolean => {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
};

/** A new FIFO: in the temp dir, or where a read-only root (docker run --read-only) still lets one be made. */
function makeFifo(): string {
  const name = `speech-gateway-stderr-${process.pid}-${randomBytes(6).toString('hex')}`;
  const dirs = [tmpdir(), '/dev/shm', process.env.USAGE_JOURNAL_DIR].filter((d): d is string => !!d);
  for (const [i, dir] of dirs.entries()) {
    try {
      execFileSync('mkfifo', ['-m', '600', join(dir, name)], { stdio: 'ignore' });
      return join(dir, name);
    } catch (err) {
      if (i === dirs.length - 1) throw err;
    }
  }
  throw new Error('no directory for a FIFO');
}

/**
 * Routes descriptor 2 through the logger (Linux; elsewhere, or when it cannot, it leaves stderr
 * as it is and says why). Call once, first thing in the process.
 */
export function captureNativeStderr(): void {
  if (process.platform !== 'linux' || !isOpen(0) || !isOpen(1) || !isOpen(2)) return;
  let fifo = '';
  let readFd = -1;
  let original = -1;
  try {
    fifo = makeFifo();
    readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    original = openSync('/proc/self/fd/2', constants.O_WRONLY | constants.O_APPEND);
    closeSync(2);
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK); // the lowest free: 2
    if (fd !== 2) throw new Error(`descriptor ${fd}, not 2`);
  } catch (err) {
    if (!isOpen(2) && original >= 0) openSync(`/proc/self/fd/${original}`, 'a'); // back to 2
    if (original >= 0) closeSync(original);
    if (readFd >= 0) closeSync(readFd);
    logger.warn({ err: (err as Error).message }, 'native stderr not captured; it stays plain text');
    return;
  } finally {
    if (fifo) unlinkSync(fifo); // open ends keep it; the name is not needed
  }
  originalStderr = original;
  const split = lineSplitter();
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
  reader.setEncoding('utf8').on('data', split).unref();
  process.once('exit', () => restore(readFd, original, split));
}

/** At exit: logs what is still in the FIFO, then gives descriptor 2 back to the original stderr. */
function restore(readFd: number, original: number, split: (chunk: string) => void): void {
  const buf = Buffer.alloc(65536);
  try {
    for (let n; (n = readSync(readFd, buf)) > 0;) split(buf.toString('utf8', 0, n));
  } catch {
    // EAGAIN: empty
  }
  split('\n');
  closeSync(2);
  openSync(`/proc/self/fd/${original}`, 'a');
  originalStderr = 2;
}
