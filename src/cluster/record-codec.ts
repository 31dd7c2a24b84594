// How session records are written to and read from Redis: JSON, with an HMAC of the cluster's
// records key when there is a CLUSTER_SECRET (authenticity.ts). What Redis returns is input: a value
// is a record only when it is one this version wrote (or, while LEGACY_RECORDS_UNTIL allows, the
// release before), its MAC is right and its fields are of the kinds the code reads.
import { checkMac, withMac, type ClusterKeys } from './authenticity.js';
import type { SealedRecord } from './records.js';

/** Where LEGACY_RECORDS_UNTIL is unset: three months after this release, well past any rolling
 *  update from the release before. */
export const LEGACY_RECORDS_READ_UNTIL = Date.parse('2027-03-01T00:00:00Z');

/** Why a stored value was not used (the rejection metric's label). */
export type RecordRejection = 'malformed' | 'unauthenticated' | 'legacy';

/** How records are written to and read from Redis: JSON, with a MAC of the cluster's key when it
 *  has one. A value that is not one this version wrote (or, in the window, the one before) is not a
 *  record: as if it were gone, and said so through `rejected`. */
export class RecordCodec {
  constructor(
    private readonly o: {
      keys?: ClusterKeys;
      /** version-2 records are read until then (ms since the epoch) */
      legacyUntil: number;
      now: () => number;
      rejected: (why: RecordRejection, value: string) => void;
    },
  ) {}

  encode(r: SealedRecord): string {
    const json = JSON.stringify(r);
    return this.o.keys ? withMac(this.o.keys.records, json) : json;
  }

  decode(value: string): SealedRecord | undefined {
    const why = this.problem(value);
    if (typeof why !== 'string') return why;
    this.o.rejected(why, value);
    return undefined;
  }

  private problem(value: string): SealedRecord | RecordRejection {
    const authentic = this.o.keys ? checkMac(this.o.keys.records, value) : value;
    const r = parsed(authentic ?? value);
    if (r === undefined) return 'malformed';
    // The release before wrote version 2, without a MAC; anything else (no version: the clear records
    // of older releases, or a forgery of one) is never read.
    if (r.v !== 3 && !(r.v === 2 && this.o.now() < this.o.legacyUntil)) return 'legacy';
    if (!shaped(r)) return 'malformed';
    return r.v === 3 && authentic === undefined ? 'unauthenticated' : r;
  }
}

const STATES: ReadonlySet<unknown> = new Set(['live', 'handing_over', 'handed_over']);
const str = (x: unknown) => typeof x === 'string';
const opt = (x: unknown) => x === undefined || typeof x === 'string';

/** The object `json` holds (without its MAC), or undefined when it is not a JSON object. */
function parsed(json: string): (Partial<SealedRecord> & { v?: unknown }) | undefined {
  try {
    const r = JSON.parse(json) as unknown;
    if (r === null || typeof r !== 'object' || Array.isArray(r)) return undefined;
    const { mac: _mac, ...rest } = r as { mac?: unknown };
    return rest;
  } catch {
    return undefined;
  }
}

/** Whether `r` has a record's shape: fields of the kinds this code reads. */
function shaped(r: Partial<SealedRecord>): r is SealedRecord {
  return (
    str(r.owner) &&
    str(r.ownerUrl) &&
    STATES.has(r.state) &&
    str(r.tenant) &&
    (r.endpoint === 'transcribe' || r.endpoint === 'streams') &&
    opt(r.interactionId) &&
    str(r.sessionKey) &&
    typeof r.updatedAt === 'number' &&
    str(r.sealed) &&
    (r.timeline === undefined || (typeof r.timeline === 'object' && r.timeline !== null))
  );
}
