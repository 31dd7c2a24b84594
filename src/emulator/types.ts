// Public types of the upstream emulator (see index.ts for what it is and is not).
import type { Endpoint } from '../protocol/index.js';

export interface EmulatorOptions {
  port?: number; // 0 (default) = ephemeral
  host?: string; // default '127.0.0.1'
  /** OAuth clients per tenant. Default: { base: [{ clientId: 'dev', clientSecret: 'dev-secret' }] } */
  clients?: Record<string, Array<{ clientId: string; clientSecret: string }>>;
  /**
   * Realms served over HTTP and sockets besides the tenants in `clients` and those made through
   * issueToken/rotateKeys; any other realm gets 404 (auth routes) or 401 (sockets), and no keys.
   */
  realms?: string[];
  /** session records kept in `sessions` (the most recent), default 200 */
  maxSessionRecords?: number;
  /** audio bytes kept across all session records, default 32 MiB; the oldest records' audio goes first */
  maxAudioBytes?: number;
  /** credits per second of media, default 0.1 */
  creditsPerSecond?: number;
  now?: () => number; // ms clock, default Date.now (token iat/exp)
  /** expires_in of tokens from the token endpoint, default 300 (the upstream's token lifetime) */
  tokenLifetimeSeconds?: number;
  /** deadline for the config message, default 10000 (the upstream's 10 s) */
  configTimeoutMs?: number;
  /** /streams maximum connection age, default 2 h (the upstream's limit); then the end sequence runs */
  streamsMaxAgeMs?: number;
}

export interface IssueTokenOptions {
  tenant: string; // realm
  scope?: string; // default 'openid' (full access)
  expiresInSeconds?: number; // default 300; negative => already expired
  notBeforeSeconds?: number; // nbf offset from now
  issuer?: string; // override iss (default `${authBase}/realms/${tenant}`)
  alg?: 'RS256' | 'ES256' | 'HS256' | 'none'; // default RS256
  signWithUnknownKey?: boolean; // signed by a key NOT in the JWKS
  clientId?: string; // azp / client_id claim, default 'dev'
  withoutSubject?: boolean; // no `sub` claim (some auth servers leave it out of client-credentials tokens)
}

/** Faults a test switches on and off while the emulator runs (`emulator.faults.stall = true`). */
export interface FaultSwitches {
  /** CONFIG_ACCEPTED (and whatever follows it) leaves this much later. */
  configDelayMs: number;
  /** Every outgoing message leaves this long after it was made (network latency). */
  messageDelayMs: number;
  /** Every config is answered CONFIG_DENIED. */
  refuseConfigs: boolean;
  /** A session that reaches this much media ends its TCP stream abruptly, no close frame (a crash). */
  dropAfterMediaSeconds: number | null;
  /** Nothing more is sent (output waits) while set; the socket still reads and answers pings. */
  stall: boolean;
  /** Every upgrade is refused with this HTTP status. */
  rejectUpgradeStatus: number | null;
  /** Adds a `padding` field of this many characters to every transcript (a talkative upstream). */
  padTranscriptBytes: number;
  /**
   * Half-open peer: every session socket, new ones too, stops reading and sending (pings go
   * unanswered) without closing, as a crashed host or a lost NAT entry looks. Acts when set;
   * false resumes reading and the output that waited.
   */
  halfOpen: boolean;
  /**
   * An upstream restarting: setting a close code (1001 going away, 1012 service restart) closes
   * every live session at once with a close frame of that code and nothing before it (no usage, no
   * end), and every new session right after its upgrade while it stays set. null: off.
   */
  goingAway: number | null;
  /** Each flush is also answered with this text frame, before `flushed` (an upstream sending text that is not JSON). null: off. */
  textOnFlush: string | null;
  /** Every delta_usage and usage reports this credits figure (an upstream reporting nonsense). null: off. */
  usageCredits: number | null;
}

export interface EmulatorSession {
  endpoint: Endpoint;
  interactionId?: string;
  tenant: string;
  token: string;
  sessionId?: string;
  config?: unknown;
  configCount: number;
  frames: number[];
  /** every frame's bytes, unless `audioDropped` */
  audio: Buffer;
  /** the audio was discarded to keep the emulator's memory bounded (`audio` is empty) */
  audioDropped: boolean;
  firstFrame?: Buffer;
  mediaSeconds: number;
  received: Array<{ t: number; kind: 'config' | 'audio' | 'flush' | 'end' | 'other'; bytes?: number }>;
  sent: unknown[];
  closed: boolean;
  closeCode?: number;
}

export interface TokenRequestRecord {
  tenant: string;
  clientId: string;
  scope: string;
  at: number;
}

export interface Emulator {
  port: number;
  wsBase: string;
  authBase: string;
  faults: FaultSwitches;
  /** the most recent sessions, oldest first (see maxSessionRecords) */
  sessions: EmulatorSession[];
  /** the most recent protocol violations by clients */
  violations: string[];
  /** the most recent token endpoint requests */
  tokenRequests: TokenRequestRecord[];
  /** certs (JWKS) requests received so far, for any realm */
  readonly jwksRequests: number;
  /** realms whose signing keys exist */
  realms(): string[];
  issueToken(o: IssueTokenOptions): Promise<string>;
  rotateKeys(tenant: string, o?: { dropOld?: boolean }): Promise<void>;
  dropAllSessions(code?: number): void;
  close(): Promise<void>;
}

export function defaultFaults(): FaultSwitches {
  return {
    configDelayMs: 0,
    messageDelayMs: 0,
    refuseConfigs: false,
    dropAfterMediaSeconds: null,
    stall: false,
    rejectUpgradeStatus: null,
    padTranscriptBytes: 0,
    halfOpen: false,
    goingAway: null,
    textOnFlush: null,
    usageCredits: null,
  };
}
