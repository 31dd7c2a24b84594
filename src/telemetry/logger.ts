// One pino logger for the process. Anything that may carry a credential is redacted by path,
// and callers log structured fields, never raw URLs or headers.
import { pino } from 'pino';

export const logger = pino({
  level: process.env.LOG_LEVEL ?? 'info',
  base: { service: 'speech-gateway' },
  redact: {
    paths: [
      'token', '*.token', 'authorization', '*.authorization', 'headers.authorization',
      'headers["sec-websocket-protocol"]', 'client_secret', '*.client_secret', 'secret', '*.secret',
      'access_token', '*.access_token', 'password', '*.password',
    ],
    censor: '[redacted]',
  },
});

export type Logger = typeof logger;
