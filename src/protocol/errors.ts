// The one catalogue of errors the gateway itself sends on a socket or in an HTTP refusal.
// Every message the gateway originates that is not one of the upstream's own messages is built here,
// in the upstream's error shape {"type":"error","error":{"id","title","status","details","doc"}}
// (docs/protocol.md, 'Errors'), so error ids stay stable for clients.

export const ERRORS = {
  // protocol
  INVALID_MESSAGE: { status: 400, title: 'Invalid message' },
  UNKNOWN_MESSAGE_TYPE: { status: 400, title: 'Unknown message type' },
  AUDIO_BEFORE_CONFIG: { status: 409, title: 'Audio sent before CONFIG_ACCEPTED' },
  MESSAGE_AFTER_END: { status: 409, title: 'Message after end' },
  TOO_MANY_FLUSHES: { status: 429, title: 'Too many flushes waiting for an answer' },
  // audio
  AUDIO_UNRECOGNIZED: { status: 415, title: 'Audio is not in a recognised format' },
  AUDIO_FORMAT_MISMATCH: { status: 415, title: 'Audio does not match the declared audioFormat' },
  AUDIO_MALFORMED: { status: 422, title: 'Audio stream is malformed' },
  AUDIO_BUFFER_OVERRUN: { status: 429, title: 'Audio arrives faster than it can be forwarded' },
  // upstream
  UPSTREAM_UNAVAILABLE: { status: 502, title: 'Speech service unavailable' },
  UPSTREAM_CLOSED: { status: 502, title: 'Speech service closed the session' },
  UPSTREAM_TIMEOUT: { status: 504, title: 'Speech service did not answer in time' },
  UPSTREAM_UNSTABLE: { status: 502, title: 'Speech service connection kept failing' },
  UPSTREAM_MESSAGE_INVALID: { status: 502, title: 'Speech service sent a message that is not JSON' },
  // gateway lifecycle
  GATEWAY_SHUTTING_DOWN: { status: 503, title: 'Gateway is shutting down' },
  // HTTP refusals at the upgrade (auth, routing, limits)
  NOT_FOUND: { status: 404, title: 'Not found' },
  INVALID_INTERACTION_ID: { status: 400, title: 'Interaction id must be a UUID' },
  ENVIRONMENT_NOT_SERVED: { status: 403, title: 'This gateway does not serve the requested environment' },
  RESUME_FORBIDDEN: { status: 403, title: 'Resume key belongs to another session' },
  RESUME_UNAVAILABLE: { status: 503, title: 'Session is live on another replica that cannot be reached' },
  HOP_FORBIDDEN: { status: 403, title: 'Internal hop without a valid signature' },
  HOP_NOT_OWNER: { status: 409, title: 'Internal hop to a replica that does not hold the session' },
  RESUME_KEY_IN_USE: { status: 409, title: 'Another connection is opening a session with this resume key' },
  INVALID_RESUME_KEY: { status: 400, title: 'Resume key must be 22-128 characters of A-Z a-z 0-9 _ -' },
  TOKEN_MISSING: { status: 401, title: 'Missing token' },
  TOKEN_INVALID: { status: 401, title: 'Invalid token' },
  TOKEN_EXPIRED: { status: 401, title: 'Token expired' },
  TENANT_MISSING: { status: 401, title: 'Missing tenant-name' },
  TENANT_INVALID: { status: 403, title: 'Invalid tenant-name' },
  AUTH_UNAVAILABLE: { status: 503, title: 'Token keys could not be fetched from the auth server' },
  TENANT_MISMATCH: { status: 403, title: 'Token was not issued for this tenant' },
  SCOPE_INSUFFICIENT: { status: 403, title: 'Token scope does not grant this endpoint' },
  FULL_ACCESS_TOKEN_IN_BROWSER: { status: 403, title: 'Full-access tokens may not be used from a browser' },
  ORIGIN_NOT_ALLOWED: { status: 403, title: 'Origin not allowed' },
  TENANT_SESSION_LIMIT: { status: 429, title: 'Too many concurrent sessions for this tenant' },
  UNCONFIGURED_LIMIT: { status: 429, title: 'Too many sockets without a config for this token' },
  UNAUTHORIZED: { status: 401, title: 'Unauthorized' },
  // ops HTTP API (usage)
  BAD_REQUEST: { status: 400, title: 'Bad request' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  USAGE_STORE_UNAVAILABLE: { status: 503, title: 'Usage store unavailable' },
  USAGE_TENANT_FORBIDDEN: { status: 403, title: 'Usage API token may not read this tenant' },
  AUDIT_STORE_UNAVAILABLE: { status: 503, title: 'Audit store unavailable' },
  INTERNAL: { status: 500, title: 'Internal error' },
} as const;

export type ErrorId = keyof typeof ERRORS;

export interface GatewayError {
  id: ErrorId;
  title: string;
  status: number;
  details: string;
  doc: string;
}

const DOC_BASE = 'docs/errors.md#';

/** Builds the catalogue entry for `id` with a specific, secret-free `details` text. */
export function gatewayError(id: ErrorId, details: string): GatewayError {
  const e = ERRORS[id];
  return { id, title: e.title, status: e.status, details, doc: DOC_BASE + id.toLowerCase() };
}

/** The socket message shape: {"type":"error","error":{...}}. */
export function errorMessage(id: ErrorId, details: string): { type: 'error'; error: GatewayError } {
  return { type: 'error', error: gatewayError(id, details) };
}
