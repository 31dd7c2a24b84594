// Human reasons for zod issues: "configuration.keyterms.terms[3].term: at most 50 characters (got 61)".
// zod's default messages ("Expected string, received number") name neither the field nor the value,
// so validation passes this error map to safeParse (never set globally: config.ts uses zod too).
import { z } from 'zod';
import { echo } from './echo.js';

const article = (t: string) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`);

/** What the client sent, short: scalars (strings through echo), containers by kind. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'string') return echo(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value;
}

export const humanErrorMap: z.ZodErrorMap = (issue, ctx) => {
  switch (issue.code) {
    case z.ZodIssueCode.invalid_type:
      if (issue.received === 'undefined') return { message: 'is required' };
      return { message: `must be ${article(issue.expected)} (got ${describe(ctx.data)})` };
    case z.ZodIssueCode.invalid_enum_value:
      return {
        message: `must be one of ${issue.options.map((o) => JSON.stringify(o)).join(', ')} (got ${describe(ctx.data)})`,
      };
    case z.ZodIssueCode.invalid_literal:
      return { message: `must be ${JSON.stringify(issue.expected)} (got ${describe(ctx.data)})` };
    case z.ZodIssueCode.too_small:
      if (issue.type === 'string') {
        return { message: Number(issue.minimum) <= 1 ? 'must not be empty' : `at least ${issue.minimum} characters` };
      }
      if (issue.type === 'array')
        return { message: `at least ${issue.minimum} item${issue.minimum === 1 ? '' : 's'} required` };
      if (issue.type === 'number')
        return { message: `must be ${issue.inclusive ? '>=' : '>'} ${issue.minimum} (got ${ctx.data})` };
      break;
    case z.ZodIssueCode.too_big:
      if (issue.type === 'string')
        return { message: `at most ${issue.maximum} characters (got ${String(ctx.data).length})` };
      if (issue.type === 'array') {
        return { message: `at most ${issue.maximum} items (got ${Array.isArray(ctx.data) ? ctx.data.length : '?'})` };
      }
      if (issue.type === 'number')
        return { message: `must be ${issue.inclusive ? '<=' : '<'} ${issue.maximum} (got ${ctx.data})` };
      break;
    case z.ZodIssueCode.invalid_union_discriminator:
      return {
        message: `must be one of ${issue.options.map((o) => JSON.stringify(o)).join(', ')} (got ${describe(ctx.data)})`,
      };
    default:
      break;
  }
  return { message: ctx.defaultError };
};

/** A field name that reads safely as `.name`; any other (a client's unknown field) is quoted with echo. */
const PLAIN_KEY = /^[A-Za-z_$][\w$]{0,39}$/;

/** `['commands', 2, 'phrases']` under root `configuration` → `configuration.commands[2].phrases`. */
export function formatPath(root: string, path: ReadonlyArray<string | number>): string {
  let out = root;
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else if (!PLAIN_KEY.test(p)) out += `[${echo(p)}]`;
    else out += out === '' ? p : `.${p}`;
  }
  return out;
}

/** The first issue of a failed parse as one reason line. */
export function firstReason(root: string, error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return `${root}: invalid`;
  return `${formatPath(root, issue.path)}: ${issue.message}`;
}
