// Refusal decisions: a catalogue error with a specific details text (never the token or any part
// of it) and a bounded reason label for metrics.
import { gatewayError, type ErrorId } from '../protocol/index.js';
import type { AuthDecision, RefusalReason } from './types.js';

export type Refusal = Extract<AuthDecision, { ok: false }>;

export function refuse(id: ErrorId, reason: RefusalReason, details: string): Refusal {
  const error = gatewayError(id, details);
  return { ok: false, status: error.status as Refusal['status'], error, reason };
}
