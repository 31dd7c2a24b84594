// `/transcribe` configuration. Field order follows the table in docs/protocol.md, '/transcribe
// configuration', so the first reported problem is the first one a reader of the table would find.
import { z } from 'zod';
import {
  audioEventsSchema,
  audioFormatSchema,
  formattingSchema,
  keytermsSchema,
  languageTag,
  replacementsSchema,
} from './config-common.js';
import { commandsSchema } from './commands.js';

export const transcribeConfigSchema = z
  .object({
    primaryLanguage: languageTag,
    interimResults: z.boolean().optional(),
    spokenPunctuation: z.boolean().optional(),
    automaticPunctuation: z.boolean().optional(),
    commands: commandsSchema.optional(),
    formatting: formattingSchema.optional(),
    audioFormat: audioFormatSchema.optional(),
    audioEvents: audioEventsSchema.optional(),
    replacements: replacementsSchema.optional(),
    keyterms: keytermsSchema.optional(),
  })
  .passthrough();

export type TranscribeConfig = z.infer<typeof transcribeConfigSchema>;
