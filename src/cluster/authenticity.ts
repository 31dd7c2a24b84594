// What the replicas write to Redis for each other is input like any other: anyone who can write to
// Redis could otherwise steer a session (its owner's address, its state, its timeline). With
// CLUSTER_SECRET each such value carries an HMAC of a key derived from it, for its own purpose
// (records, heartbeats), and a reader uses a value only when its MAC is right. Session positions,
// which only a replica holding the client's resume key reads, carry a MAC of a key derived from
// that resume key (takeover.ts). node:crypto's HMAC and HKDF; no library adds anything here.
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

const SALT = 'speech-gateway/cluster/authenticity';

/** The keys CLUSTER_SECRET gives: one per kind of value, so a MAC of one kind never passes for another. */
export interface ClusterKeys {
  records: Buffer;
  heartbeats: Buffer;
}

export function clusterKeys(secret: string | undefined): ClusterKeys | undefined {
  if (!secret) return undefined;
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', secret, SALT, info, 32));
  return { records: derive('session-record/hmac-sha256'), heartbeats: derive('replica-heartbeat/hmac-sha256') };
}

export const hmac = (key: Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** Constant-time comparison of a MAC with one read back. */
export const sameMac = (expected: Buffer, got: Buffer) =>
  expected.length === got.length && timingSafeEqual(expected, got);

/** The same, with the one read back in hex. */
export const macMatches = (expected: Buffer, hex: string) =>
  /^[0-9a-f]{64}$/.test(hex) && sameMac(expected, Buffer.from(hex, 'hex'));

const MAC_FIELD = ',"mac":"';
const MAC_SUFFIX_LENGTH = MAC_FIELD.length + 64 + 2; // the field, 64 hex digits, '"}'

/** A JSON object's text with a last field `mac`: the HMAC of the text without it. The MAC covers
 *  the exact bytes stored, so reading needs no canonical form; Lua scripts still read it as JSON. */
export function withMac(key: Buffer, json: string): string {
  return `${json.slice(0, -1)}${MAC_FIELD}${hmac(key, json).toString('hex')}"}`;
}

/** The text `withMac` was given, when `value`'s MAC is right; else undefined. */
export function checkMac(key: Buffer, value: string): string | undefined {
  const at = value.length - MAC_SUFFIX_LENGTH;
  if (at < 1 || !value.endsWith('"}') || value.slice(at, at + MAC_FIELD.length) !== MAC_FIELD) return undefined;
  const json = `${value.slice(0, at)}}`;
  return macMatches(hmac(key, json), value.slice(at + MAC_FIELD.length, -2)) ? json : undefined;
}
