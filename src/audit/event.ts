// What one audit event holds (HIPAA 45 CFR 164.312(b): who did what, when, from where, with what
// outcome), and how an event is built: only the fields named here are copied, each string cut to a
// bound, so nothing else (audio, transcripts, configs, tokens) can ride along by accident.
import { createHmac, hkdfSync, randomBytes } from 'node:crypto';

export type AuditEventName =
  | 'upgrade_refused'
  | 'upgrade_accepted'
  | 'session_opened'
  | 'session_restored'
  | 'config_accepted'
  | 'config_refused'
  | 'session_resumed'
  | 'session_taken_over'
  | 'session_handed_over'
  | 'session_ended'
  | 'usage_api_call';

export interface AuditEvent {
  /** ISO-8601, UTC */
  time: string;
  event: AuditEventName;
  /** ok, refused, or a session's end outcome */
  outcome: string;
  /** a short label (a refusal reason, where a taken over session came from) */
  reason?: string;
  /** the error id the client was answered with */
  error?: string;
  tenant?: string;
  /** the verified token's `sub` */
  subject?: string;
  /** the verified token's client (azp / client_id) */
  clientId?: string;
  /** the client's address (address.ts: X-Forwarded-For only from a trusted proxy) */
  address?: string;
  /** the socket's peer the address was taken from */
  peer?: string;
  endpoint?: string;
  interactionId?: string;
  /** the gateway's session key */
  sessionId?: string;
  /** a keyed hash of the resume key (resumeLink): links a session's connections, never the key itself */
  resumeKeyHash?: string;
  environment?: string;
  /** what kind of socket an accepted upgrade became (new, resume, restore, awaiting, relay, hop) */
  kind?: string;
  mediaSeconds?: number;
  credits?: number;
  /** session_ended: seconds of the forwarded media that held speech (the gateway's speech detector) */
  speechSeconds?: number;
  /** session_ended: of those, the seconds final transcripts cover */
  transcribedSpeechSeconds?: number;
  /** session_ended: uncovered stretches of speech of 2 s or more */
  gaps?: number;
  /** session_ended: the speech seconds in the gaps listed in the session's ledger row (the first 100) */
  gapSeconds?: number;
  /** usage API: the name of the API token that called (never the token) */
  caller?: string;
  /** usage API: the path called */
  path?: string;
  /** usage API: the HTTP status answered */
  status?: number;
  /** usage API: the tenant a token asked for and may not read (the event is in its own tenants' trails) */
  asked?: string;
  /** coalesce.ts: this many more events like this one came since `since`, and are not written one by one */
  count?: number;
  since?: string;
}

/** Which tenant trail keeps an event: `tenant`'s, made if need be (its name is known: a token of it
 * verified, or the operator named it), `existing` only if it has one, or `none`. */
export type TrailMode = 'create' | 'existing' | 'none';

/** `resumeKey` is never written: the trail turns it into `resumeKeyHash` with its link key. */
export type AuditInput = Omit<AuditEvent, 'time'> & { resumeKey?: string; trail?: TrailMode };

const STRING_FIELDS = [
  'event',
  'outcome',
  'reason',
  'error',
  'tenant',
  'subject',
  'clientId',
  'address',
  'peer',
  'endpoint',
  'interactionId',
  'sessionId',
  'resumeKeyHash',
  'environment',
  'kind',
  'caller',
  'path',
  'asked',
  'since',
] as const;
const NUMBER_FIELDS = [
  'mediaSeconds',
  'credits',
  'speechSeconds',
  'transcribedSpeechSeconds',
  'gaps',
  'gapSeconds',
  'status',
  'count',
] as const;
/** Every string a client chose (subject, environment, path) is bounded: an event stays a short line. */
const MAX_STRING = 256;

/** The event as written: `time` first, then only the known fields that are set. */
export function auditEvent(input: AuditInput, now: number): AuditEvent {
  const out: Record<string, string | number> = { time: new Date(now).toISOString() };
  for (const k of STRING_FIELDS) {
    const v = input[k];
    if (typeof v === 'string' && v !== '') out[k] = v.length > MAX_STRING ? v.slice(0, MAX_STRING) : v;
  }
  for (const k of NUMBER_FIELDS) {
    const v = input[k];
    if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
  }
  return out as unknown as AuditEvent;
}

/** The key resume links are made with: derived from CLUSTER_SECRET, so every replica of a deployment
 * links alike; without one a random key of this process's own. Either way not the plain SHA-256 that
 * names session records, so the audit set does not tie a record to the subject it seals. */
export function linkKeyOf(clusterSecret: string | undefined): Buffer {
  if (!clusterSecret) return randomBytes(32);
  return Buffer.from(hkdfSync('sha256', clusterSecret, 'speech-gateway audit', 'resume key link', 32));
}

/** 16 hex digits of the key's HMAC-SHA-256 under `linkKey`: enough to link a session's connections,
 * useless to resume one or to find its record. */
export function resumeLink(linkKey: Buffer, key: string): string {
  return createHmac('sha256', linkKey).update(key).digest('hex').slice(0, 16);
}
