// The `resume=<key>` a client chooses before its first connection and sends on every connection of
// one session. With a token of the same tenant, scope and subject it takes the session over, so it is
// a credential: never log it. Only its shape can be checked here: 22–128 URL-safe characters, enough
// room for 128 random bits (22+ base64url or 32+ hex characters) and nothing that needs escaping.
const RESUME_KEY = /^[A-Za-z0-9_-]{22,128}$/;

export function isResumeKey(s: unknown): s is string {
  return typeof s === 'string' && RESUME_KEY.test(s);
}
