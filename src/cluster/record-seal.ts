// What ties a session record to the client's resume key: the keys derived from it (the record's
// name, the content's sealing key, the positions' MAC key), the seal over the content with the whole
// clear head as its associated data, and the MAC of each position. Only a replica given the resume
// key can make or open any of them.
import { hmac, sameMac } from './authenticity.js';
import {
  recordKeyHash,
  type RecordContent,
  type RecordHead,
  type SealedRecord,
  type SessionRecord,
} from './records.js';
import { seal, sealingKey, unseal } from './sealed.js';

/** A session's record keys: where its record is (the key's hash), what seals its content, and what
 *  authenticates its positions (only a replica given the resume key reads them). */
export interface RecordKeys {
  hash: string;
  sealing: Buffer;
  positions: Buffer;
}

export function recordKeys(resumeKey: string): RecordKeys {
  const sealing = sealingKey(resumeKey);
  return { hash: recordKeyHash(resumeKey), sealing, positions: hmac(sealing, 'session-positions/hmac-sha256') };
}

/** The clear fields a record's content is bound to (its associated data): in version 3 the whole
 *  head, in the fixed order below, so a record with any clear field changed in Redis does not open;
 *  version 2 bound four. */
function boundTo(h: RecordHead, v: SealedRecord['v']): string {
  const four = [h.tenant, h.endpoint, h.interactionId ?? null, h.sessionKey];
  if (v === 2) return JSON.stringify(four);
  return JSON.stringify([...four, h.owner, h.ownerUrl, h.state, h.updatedAt, h.timeline ?? null]);
}

/** The record as Redis gets it: its client content sealed. */
export function sealRecord(k: RecordKeys, r: SessionRecord): SealedRecord {
  const { subject, environment, config, accepted, init, cont, missed, ...head } = r;
  return {
    ...head,
    v: 3,
    sealed: seal(k.sealing, boundTo(head, 3), { subject, environment, config, accepted, init, cont, missed }),
  };
}

/** The record with its content; throws when it does not open (changed in Redis). */
export function openRecord(k: RecordKeys, r: SealedRecord): SessionRecord {
  const { v, sealed, ...head } = r;
  return { ...head, ...unseal<RecordContent>(k.sealing, boundTo(head, v), sealed) };
}

/** A position as stored: the position, a dot, and its MAC under the session's own key (base64url,
 *  128 bits): Redis cannot move a session's timeline (which finals a successor skips). */
export function signedPosition(k: RecordKeys, position: string): string {
  return `${position}.${hmac(k.positions, `${k.hash}\n${position}`).subarray(0, 16).toString('base64url')}`;
}

/** The position a stored value holds, when its MAC is right. */
export function authenticPosition(k: RecordKeys, stored: string): string | undefined {
  const dot = stored.lastIndexOf('.');
  if (dot < 0) return undefined;
  const position = stored.slice(0, dot);
  const expected = hmac(k.positions, `${k.hash}\n${position}`).subarray(0, 16);
  return sameMac(expected, Buffer.from(stored.slice(dot + 1), 'base64url')) ? position : undefined;
}
