// `/transcribe` voice commands (docs/protocol.md, 'Voice commands'): shape, unique ids, and the
// phrase rules the upstream documents for variables: every {name} is declared, a wildcard has a
// literal trigger word before it, and two wildcards are separated by a non-empty literal.
import { z } from 'zod';
import { nonBlank } from './config-common.js';
import { echo } from './echo.js';

const variableSchema = z
  .object({
    key: nonBlank,
    type: z.enum(['enum', 'wildcard']),
    enum: z.array(nonBlank).optional(), // ignored for wildcards, required (non-empty) for enums
  })
  .passthrough()
  .superRefine((v, ctx) => {
    if (v.type !== 'enum') return;
    if (v.enum === undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['enum'], message: 'is required when type is "enum"' });
    } else if (v.enum.length === 0) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['enum'],
        message: 'an enum variable needs at least one value',
      });
    }
  });

type Part = { literal: string } | { ref: string };

/** Splits a phrase into literal text and {ref}s; a string describing the problem when braces are malformed. */
export function splitPhrase(phrase: string): Part[] | string {
  const parts: Part[] = [];
  let i = 0;
  while (i < phrase.length) {
    const open = phrase.indexOf('{', i);
    const close = phrase.indexOf('}', i);
    if (close >= 0 && (open < 0 || close < open)) return `unmatched "}" at position ${close}`;
    if (open < 0) {
      parts.push({ literal: phrase.slice(i) });
      break;
    }
    if (open > i) parts.push({ literal: phrase.slice(i, open) });
    const end = phrase.indexOf('}', open + 1);
    const nested = phrase.indexOf('{', open + 1);
    if (end < 0 || (nested >= 0 && nested < end)) return `unclosed "{" at position ${open}`;
    const name = phrase.slice(open + 1, end);
    if (name === '') return `empty variable reference "{}" at position ${open}`;
    parts.push({ ref: name });
    i = end + 1;
  }
  return parts;
}

/** First rule a phrase breaks, given the command's declared variables; undefined when it is fine. */
export function phraseProblem(phrase: string, types: ReadonlyMap<string, 'enum' | 'wildcard'>): string | undefined {
  const parts = splitPhrase(phrase);
  if (typeof parts === 'string') return parts;
  let literalSince = ''; // literal text since the start or since the previous wildcard
  let previousWildcard: string | undefined;
  for (const part of parts) {
    if ('literal' in part) {
      literalSince += part.literal;
      continue;
    }
    const type = types.get(part.ref);
    if (type === undefined) return `${echo(`{${part.ref}}`)} is not a declared variable key`;
    if (type !== 'wildcard') continue;
    if (literalSince.trim() === '') {
      return previousWildcard === undefined
        ? `wildcard ${echo(`{${part.ref}}`)} must be preceded by a literal trigger word`
        : `wildcards ${echo(`{${previousWildcard}}`)} and ${echo(`{${part.ref}}`)} must be separated by a non-empty literal`;
    }
    previousWildcard = part.ref;
    literalSince = '';
  }
  return undefined;
}

export const commandSchema = z
  .object({
    id: nonBlank,
    phrases: z.array(nonBlank).min(1, { message: 'at least one phrase is required' }),
    variables: z.array(variableSchema).optional(),
  })
  .passthrough()
  .superRefine((cmd, ctx) => {
    const types = new Map<string, 'enum' | 'wildcard'>();
    (cmd.variables ?? []).forEach((v, i) => {
      if (types.has(v.key)) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          path: ['variables', i, 'key'],
          message: `duplicate variable key ${echo(v.key)}`,
        });
      }
      types.set(v.key, v.type);
    });
    cmd.phrases.forEach((phrase, i) => {
      const problem = phraseProblem(phrase, types);
      if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['phrases', i], message: problem });
    });
  });

export const commandsSchema = z.array(commandSchema).superRefine((cmds, ctx) => {
  const seen = new Map<string, number>();
  cmds.forEach((c, i) => {
    const first = seen.get(c.id);
    if (first !== undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: [i, 'id'],
        message: `duplicate command id ${echo(c.id)} (also commands[${first}].id)`,
      });
    } else seen.set(c.id, i);
  });
});
