// Test support: tokens a forger can make without any key.
import { randomBytes } from 'node:crypto';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/** A well-formed JWT of `header` and `payload` whose signature is 256 random bytes: no key signed it. */
export function forgedJwt(header: object, payload: object): string {
  return `${b64(header)}.${b64(payload)}.${randomBytes(256).toString('base64url')}`;
}
