// One pino logger for the process, writing to stdout through the bounded queue (stdout.ts). Anything
// that may carry a credential is redacted by path, and callers log structured fields, never raw URLs
// or headers. The level comes from the
// environment at import (so tests and tools are quiet from their first line); an unknown level
// falls back to info here and is reported by config validation, which main then applies. Lines
// carry the level's name and an ISO-8601 time, as log pipelines and auditors read them.
import { levels, pino, stdTimeFunctions } from 'pino';
import { stdoutQueue } from './stdout.js';

const envLevel = process.env.LOG_LEVEL ?? '';
export const logger = pino(
  {
    level: Object.hasOwn(levels.values, envLevel) || envLevel === 'silent' ? envLevel : 'info',
    base: { service: 'speech-gateway' },
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: {
      paths: [
        'token',
        '*.token',
        'authorization',
        '*.authorization',
        'headers.authorization',
        'headers["sec-websocket-protocol"]',
        'client_secret',
        '*.client_secret',
        'secret',
        '*.secret',
        'access_token',
        '*.access_token',
        'password',
        '*.password',
      ],
      censor: '[redacted]',
    },
  },
  stdoutQueue,
);

export type Logger = typeof logger;
