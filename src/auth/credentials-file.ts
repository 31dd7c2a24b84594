// Upstream client credentials from the configuration (a mounted Secret file or inline JSON),
// validated once at start. Errors name the source and the field, never a value: JSON.parse's own
// message quotes the input, so it is not passed on.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { ClientCredentials } from './upstream-credentials.js';

const schema = z.record(
  z.string().regex(/^(\*|[A-Za-z0-9._-]{1,64})$/, 'tenant must be "*" or 1-64 characters of A-Z a-z 0-9 . _ -'),
  z.object({ clientId: z.string().min(1), clientSecret: z.string().min(1) }),
);

export function loadUpstreamCredentials(o: { file?: string; inline?: string }): ClientCredentials {
  if (o.file && o.inline) throw new Error('set only one of UPSTREAM_CREDENTIALS_FILE and UPSTREAM_CREDENTIALS');
  let source: string;
  let text: string;
  if (o.file) {
    source = `UPSTREAM_CREDENTIALS_FILE (${o.file})`;
    try {
      text = readFileSync(o.file, 'utf8');
    } catch (err) {
      throw new Error(`${source}: cannot read file (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
        cause: err,
      });
    }
  } else if (o.inline) {
    source = 'UPSTREAM_CREDENTIALS';
    text = o.inline;
  } else {
    return {};
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${source}: not valid JSON (expected {"<tenant>":{"clientId":"...","clientSecret":"..."}})`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${source}: ${problems}`);
  }
  return parsed.data;
}
