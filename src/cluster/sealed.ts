// The client's content in a session record (its config, container headers, audio bytes of an open
// Cluster, the messages it missed, its subject) is sealed with AES-256-GCM under a key derived from
// its resume key, which only the client and the process holding the session know: Redis, and
// whoever reads it or its backups, sees ciphertext. The record's Redis key is the resume key's plain
// SHA-256; the sealing key is HKDF-SHA-256 of the resume key with a salt and info of its own, which
// that hash does not give. A replica taking the session over derives it from the key its client presents.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const SALT = 'speech-gateway/session-record/seal';
const INFO = 'aes-256-gcm/v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The sealing key of the records of the session opened with `resumeKey`. */
export function sealingKey(resumeKey: string): Buffer {
  return Buffer.from(hkdfSync('sha256', resumeKey, SALT, INFO, 32));
}

/** `content` as JSON, encrypted and authenticated together with `aad` (clear fields it belongs to): base64 of IV | ciphertext | tag. */
export function seal(key: Buffer, aad: string, content: unknown): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(JSON.stringify(content)), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
}

/** The content `seal` sealed; throws when the key or `aad` differ or the bytes were changed. */
export function unseal<T>(key: Buffer, aad: string, sealed: string): T {
  const b = Buffer.from(sealed, 'base64');
  if (b.length < IV_BYTES + TAG_BYTES) throw new Error('sealed content too short');
  const decipher = createDecipheriv('aes-256-gcm', key, b.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(b.subarray(b.length - TAG_BYTES));
  return JSON.parse(
    Buffer.concat([decipher.update(b.subarray(IV_BYTES, b.length - TAG_BYTES)), decipher.final()]).toString(),
  ) as T;
}
