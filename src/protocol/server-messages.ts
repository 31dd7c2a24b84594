// Messages the gateway itself sends in the spec's shapes (spec section 6, DESIGN.md section 1).
// Errors are built by errors.ts (errorMessage).
import type { Endpoint } from './endpoint.js';

export type ConfigStatusType =
  | 'CONFIG_ACCEPTED'
  | 'CONFIG_DENIED'
  | 'CONFIG_REJECTED'
  | 'CONFIG_TIMEOUT'
  | 'CONFIG_NOT_PROVIDED'
  | 'CONFIG_ALREADY_RECEIVED'
  | 'CONFIG_MISSING';

export interface ConfigStatusExtra {
  reason?: string;
  sessionId?: string;
  configuration?: unknown;
}

export interface ConfigStatusMessage extends ConfigStatusExtra {
  type: ConfigStatusType;
}

export const serverMessages = {
  /** Only the fields given are present (no `"reason": undefined` keys). */
  configStatus(type: ConfigStatusType, extra: ConfigStatusExtra = {}): ConfigStatusMessage {
    const msg: ConfigStatusMessage = { type };
    if (extra.reason !== undefined) msg.reason = extra.reason;
    if (extra.sessionId !== undefined) msg.sessionId = extra.sessionId;
    if (extra.configuration !== undefined) msg.configuration = extra.configuration;
    return msg;
  },
  flushed(): { type: 'flushed' } {
    return { type: 'flushed' };
  },
  deltaUsage(credits: number): { type: 'delta_usage'; credits: number } {
    return { type: 'delta_usage', credits };
  },
  usage(credits: number): { type: 'usage'; credits: number } {
    return { type: 'usage', credits };
  },
  /** `/transcribe` ends with "ended", `/streams` with "ENDED". */
  ended(endpoint: Endpoint): { type: 'ended' | 'ENDED' } {
    return { type: endpoint === 'transcribe' ? 'ended' : 'ENDED' };
  },
};

/** Spec 3.3: the timeout message differs per socket. */
export function configTimeoutType(endpoint: Endpoint): 'CONFIG_TIMEOUT' | 'CONFIG_NOT_PROVIDED' {
  return endpoint === 'transcribe' ? 'CONFIG_TIMEOUT' : 'CONFIG_NOT_PROVIDED';
}
