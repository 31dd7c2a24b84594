// `/streams` configuration (docs/protocol.md, '/streams configuration'). The legacy
// `transcription.isDiarization` is accepted and normalised to `diarize`, so the upstream and
// everything after validation see one name.
import { z } from 'zod';
import {
  audioEventsSchema,
  audioFormatSchema,
  formattingSchema,
  languageTag,
  nonBlank,
  streamsKeytermsSchema,
  streamsReplacementsSchema,
} from './config-common.js';

const transcriptionSchema = z
  .object({
    primaryLanguage: languageTag,
    diarize: z.boolean().optional(),
    isDiarization: z.boolean().optional(),
    wordLevel: z.object({ enabled: z.boolean().optional() }).passthrough().optional(),
    isMultichannel: z.boolean().optional(),
    participants: z.array(z.object({ channel: z.number().int().min(0), role: nonBlank }).passthrough()).optional(),
  })
  .passthrough()
  .superRefine((t, ctx) => {
    if (t.diarize !== undefined && t.isDiarization !== undefined && t.diarize !== t.isDiarization) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['isDiarization'],
        message: `conflicts with transcription.diarize (${t.isDiarization} vs ${t.diarize}); send only diarize`,
      });
    }
  })
  .transform(({ isDiarization, ...rest }) => {
    const diarize = rest.diarize ?? isDiarization;
    return diarize === undefined ? rest : { ...rest, diarize };
  });

const modeSchema = z
  .object({
    type: z.enum(['facts', 'transcription']),
    outputLocale: languageTag.optional(),
    factGenerationInterval: z.enum(['', 'fixed', 'fast_init']).optional(),
  })
  .passthrough()
  .superRefine((m, ctx) => {
    if (m.type === 'facts' && m.outputLocale === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['outputLocale'],
        message: 'is required when mode.type is "facts"',
      });
    }
  });

export const streamsConfigSchema = z
  .object({
    transcription: transcriptionSchema,
    mode: modeSchema,
    retentionPolicy: z.enum(['none', 'retain']).optional(),
    formatting: formattingSchema.optional(),
    audioFormat: audioFormatSchema.optional(),
    audioEvents: audioEventsSchema.optional(),
    replacements: streamsReplacementsSchema.optional(),
    keyterms: streamsKeytermsSchema.optional(),
  })
  .passthrough();

export type StreamsConfig = z.infer<typeof streamsConfigSchema>;
