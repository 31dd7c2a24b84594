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

/** [start, end) in media seconds of one upstream session (its own media: a new session starts at 0). */
export type MediaRange = [number, number];

/**
 * Which upstream sessions a transcript fault reaches: switching it on reaches the sessions
 * transcribing at that moment (oldest first), then each new one as its config is accepted, until
 * `sessions` of them are reached. Omitted: every session, live and future, so no reconnection cures
 * it. `sessions: 1` set before the client connects: the first upstream session fails, the
 * replacement the gateway opens works.
 */
export interface TranscriptFaultScope {
  sessions?: number;
}

/** stopTranscribing and interimsOnly: from when, in each reached session's own media seconds. */
export interface StopTranscribing extends TranscriptFaultScope {
  /** Omitted: a session live when the fault is switched on from its media now, a new one from its start. */
  afterMediaSeconds?: number;
}

/** dropFinals: the media ranges whose finals are never sent. */
export interface DropFinals extends TranscriptFaultScope {
  /** A final segment that overlaps one of these is not sent (at most 1000 ranges). */
  ranges: MediaRange[];
}

/**
 * What the transcript faults did, counted since each was last switched on (assigning it a new
 * value zeroes its counts; switching it off with null keeps them) or since resetFaults().
 */
export interface TranscriptFaultCounts {
  /** upstream sessions that stopped transcribing (stopTranscribing reached their media) */
  stoppedSessions: number;
  /** upstream sessions whose finals stopped (interimsOnly reached their media) */
  interimsOnlySessions: number;
  /** finals interimsOnly kept from the client */
  withheldFinals: number;
  /** finals dropFinals kept from the client */
  droppedFinals: number;
}

/**
 * Faults a test switches on and off while the emulator runs (`emulator.faults.stall = true`).
 * Assign a new value to switch one (an object changed in place is not seen); resetFaults() puts
 * every switch back to off.
 */
export interface FaultSwitches {
  /** CONFIG_ACCEPTED (and whatever follows it) leaves this much later. */
  configDelayMs: number;
  /** Every outgoing message leaves this long after it was made (network latency). */
  messageDelayMs: number;
  /** Every config is answered CONFIG_DENIED. */
  refuseConfigs: boolean;
  /** A session that reaches this much media ends its TCP stream abruptly, no close frame (a crash). */
  dropAfterMediaSeconds: number | null;
  /**
   * Nothing more is sent (output waits, then leaves in order) while set; the socket still reads and
   * answers pings. For a recogniser that goes quiet while the rest answers, see stopTranscribing.
   */
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
  /**
   * A recogniser that silently stops: a reached session sends no transcript (final or interim) and
   * no command of media past `afterMediaSeconds` (the segment ending there is still sent), and
   * nothing else changes: the socket stays healthy, pings are
   * answered, audio is taken and counted, CONFIG_ACCEPTED, flushed, delta_usage, usage, ended and
   * /streams facts (media-time marks, not recognition) are sent as usual. What is not transcribed is
   * never sent later, also once the fault is off. Counted in faultCounts.stoppedSessions and each
   * session's stoppedTranscribingAt. null: off.
   */
  stopTranscribing: StopTranscribing | null;
  /**
   * A recogniser that answers interim results but never finalises: a reached session sends no final
   * of media past `afterMediaSeconds` (nor the command a final would carry); interims go on
   * where the config asked for them (/transcribe interimResults; /streams has none, so it goes
   * quiet). Counted in faultCounts.interimsOnlySessions and withheldFinals. null: off.
   */
  interimsOnly: StopTranscribing | null;
  /**
   * A recogniser that loses stretches: the finals of segments overlapping `ranges` are never sent
   * (interims still are), as when some speech goes untranscribed while the rest comes through.
   * Counted in faultCounts.droppedFinals. null: off.
   */
  dropFinals: DropFinals | null;
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
  /** media seconds at which stopTranscribing stopped this session's transcripts */
  stoppedTranscribingAt?: number;
  /** transcripts and commands the transcript faults kept from the client */
  withheldTranscripts: number;
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
  /** what the transcript faults did (see TranscriptFaultCounts) */
  readonly faultCounts: Readonly<TranscriptFaultCounts>;
  /** every fault switch back to off (defaultFaults()), and faultCounts zeroed: between tests */
  resetFaults(): void;
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
    stopTranscribing: null,
    interimsOnly: null,
    dropFinals: null,
  };
}
