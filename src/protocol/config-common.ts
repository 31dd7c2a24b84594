// Configuration pieces both sockets share: formatting, audioFormat, audioEvents, replacements, keyterms
// (docs/protocol.md, 'Shared configuration pieces'). Objects pass unknown fields through: the upstream
// may know fields it does not document.
import { z } from 'zod';

// Bounds on what any configuration may carry (checked by config-bounds.ts, whatever the field). The
// size fits the largest legal /streams lists (1,000 replacements and 1,000 keyterms of 50 characters,
// about 190 KB) with room; depth 10 is twice what the deepest documented field
// (commands[].variables[].enum) needs.
export const MAX_CONFIG_BYTES = 256 * 1024;
export const MAX_CONFIG_DEPTH = 10;
export const MAX_STRING_CHARS = 1000;
export const MAX_OBJECT_KEYS = 100;
/** Every array; also the upstream's own bound on replacements and keyterms (at most 1,000 items each). */
export const MAX_LIST_ITEMS = 1000;
// Tighter caps for fields that are short by nature: 35 characters hold any practical language tag,
// and a MIME type and subtype are at most 127 characters each, so 255 leaves room for codecs.
export const MAX_LANGUAGE_CHARS = 35;
export const MAX_AUDIO_FORMAT_CHARS = 255;

const notBlank = (s: string) => s.trim() !== '';
export const nonBlank = z.string().refine(notBlank, { message: 'must not be empty' });
export const languageTag = z.string().max(MAX_LANGUAGE_CHARS).refine(notBlank, { message: 'must not be empty' });
export const audioFormatSchema = z.string().max(MAX_AUDIO_FORMAT_CHARS);

/** Refinement for the /streams limit "at most N words" (words = whitespace-separated runs). */
export function maxWords(n: number) {
  return (s: string, ctx: z.RefinementCtx) => {
    const words = s.trim() === '' ? 0 : s.trim().split(/\s+/).length;
    if (words > n) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `at most ${n} words (got ${words})` });
  };
}

export const formattingSchema = z
  .object({
    dates: z.enum(['locale:long', 'locale:medium', 'locale:short', 'iso', 'as_dictated']).optional(),
    times: z.enum(['locale', 'h24', 'h12']).optional(),
    numbers: z.enum(['numerals_above_nine', 'numerals', 'as_dictated']).optional(),
    measurements: z.enum(['abbreviated', 'as_dictated']).optional(),
    numericRanges: z.enum(['numerals', 'as_dictated']).optional(),
    ordinals: z.enum(['numerals_above_nine', 'numerals', 'as_dictated']).optional(),
  })
  .passthrough();

export const audioEventsSchema = z.object({ enabled: z.boolean() }).passthrough();

export const MAX_TERM_CHARS = 50;
export const MAX_STREAMS_WORDS = 5;

/** `/transcribe`: find and replace are plain strings. */
export const replacementsSchema = z
  .array(z.object({ find: z.string(), replace: z.string() }).passthrough())
  .max(MAX_LIST_ITEMS);

/** `/streams`: each side at most 50 characters and 5 words. */
const shortPhrase = z.string().max(MAX_TERM_CHARS).superRefine(maxWords(MAX_STREAMS_WORDS));
export const streamsReplacementsSchema = z
  .array(z.object({ find: shortPhrase, replace: shortPhrase }).passthrough())
  .max(MAX_LIST_ITEMS);

export const keytermsSchema = z
  .object({ terms: z.array(z.object({ term: z.string().max(MAX_TERM_CHARS) }).passthrough()).max(MAX_LIST_ITEMS) })
  .passthrough();

export const streamsKeytermsSchema = z
  .object({ terms: z.array(z.object({ term: shortPhrase }).passthrough()).max(MAX_LIST_ITEMS) })
  .passthrough();
