// One entry for config validation: schema by endpoint, first problem as a reason naming the field,
// then the bounds on everything it carries (unknown fields included: they are forwarded), then the
// audioFormat support check (an invalid config is denied even if its format is also unsupported).
// The schema runs first so a known field gets its own limit in the reason (primaryLanguage: 35, not
// the general 1,000); it is safe on any input: unknown fields pass through without being walked.
import { transcribeConfigSchema, type TranscribeConfig } from './transcribe-config.js';
import { streamsConfigSchema, type StreamsConfig } from './streams-config.js';
import { isUpstreamAudioFormat } from './audio-format.js';
import { firstReason, humanErrorMap } from './reasons.js';
import { configBoundsProblem } from './config-bounds.js';
import { echo } from './echo.js';
import type { Endpoint } from './endpoint.js';

export type ConfigValidation =
  { ok: true; config: TranscribeConfig | StreamsConfig } | { ok: false; status: 'denied' | 'rejected'; reason: string };

export interface ValidateConfigOptions {
  /** Which audioFormat values the gateway takes (it may transcode more than the upstream accepts). */
  isSupportedAudioFormat?: (mime: string) => boolean;
}

export function validateConfig(
  endpoint: Endpoint,
  configuration: unknown,
  opts: ValidateConfigOptions = {},
): ConfigValidation {
  const schema = endpoint === 'transcribe' ? transcribeConfigSchema : streamsConfigSchema;
  const parsed = schema.safeParse(configuration, { errorMap: humanErrorMap });
  if (!parsed.success) return { ok: false, status: 'denied', reason: firstReason('configuration', parsed.error) };
  const outOfBounds = configBoundsProblem(parsed.data);
  if (outOfBounds !== undefined) return { ok: false, status: 'denied', reason: outOfBounds };
  const format = parsed.data.audioFormat;
  const supported = opts.isSupportedAudioFormat ?? isUpstreamAudioFormat;
  if (format !== undefined && !supported(format)) {
    return {
      ok: false,
      status: 'rejected',
      reason: `configuration.audioFormat: unsupported audio format ${echo(format)}`,
    };
  }
  return { ok: true, config: parsed.data };
}
