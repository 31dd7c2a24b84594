// Minimal config validation as the upstream does it (docs/protocol.md, 'Configuration'), and the
// resolved configuration with server defaults that CONFIG_ACCEPTED carries.
import type { Endpoint } from '../protocol/index.js';

export type ConfigVerdict =
  | { ok: true; resolved: Record<string, unknown> }
  | { ok: false; type: 'CONFIG_DENIED' | 'CONFIG_REJECTED'; reason: string };

// The upstream's list, not the gateway's parser (src/protocol/audio-format.ts): the emulator checks
// what the gateway forwards, so it must not agree with the gateway by construction.
const AUDIO_FORMAT =
  /^audio\/(ogg|webm|opus|vorbis|mpeg|mp3|mpeg3|flac|mp4|m4a)(\s*;\s*codecs\s*=\s*"?(opus|vorbis)"?)?$/i;

const FORMATTING_DEFAULTS = {
  dates: 'locale:long',
  times: 'locale',
  numbers: 'numerals_above_nine',
  measurements: 'abbreviated',
  numericRanges: 'numerals',
  ordinals: 'numerals_above_nine',
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

export function isSupportedAudioFormat(mime: string): boolean {
  return AUDIO_FORMAT.test(mime.trim());
}

function commonDefaults(c: Obj): Obj {
  return {
    formatting: { ...FORMATTING_DEFAULTS, ...(isObj(c.formatting) ? c.formatting : {}) },
    audioEvents: { enabled: false, ...(isObj(c.audioEvents) ? c.audioEvents : {}) },
  };
}

function checkAudioFormat(c: Obj): ConfigVerdict | null {
  if (c.audioFormat === undefined) return null;
  if (typeof c.audioFormat !== 'string' || !isSupportedAudioFormat(c.audioFormat)) {
    return { ok: false, type: 'CONFIG_REJECTED', reason: `unsupported audioFormat ${JSON.stringify(c.audioFormat)}` };
  }
  return null;
}

export function checkConfig(endpoint: Endpoint, configuration: unknown): ConfigVerdict {
  if (!isObj(configuration)) return { ok: false, type: 'CONFIG_DENIED', reason: 'configuration must be an object' };
  const c = configuration;
  if (endpoint === 'transcribe') {
    if (!nonEmpty(c.primaryLanguage))
      return { ok: false, type: 'CONFIG_DENIED', reason: 'primaryLanguage is required' };
    if (c.commands !== undefined && !Array.isArray(c.commands)) {
      return { ok: false, type: 'CONFIG_DENIED', reason: 'commands must be an array' };
    }
    const format = checkAudioFormat(c);
    if (format) return format;
    return {
      ok: true,
      resolved: {
        interimResults: false,
        spokenPunctuation: false,
        automaticPunctuation: false,
        commands: [],
        ...c,
        ...commonDefaults(c),
      },
    };
  }
  const t = isObj(c.transcription) ? c.transcription : undefined;
  const mode = isObj(c.mode) ? c.mode : undefined;
  if (!t || !nonEmpty(t.primaryLanguage)) {
    return { ok: false, type: 'CONFIG_DENIED', reason: 'transcription.primaryLanguage is required' };
  }
  if (!mode || (mode.type !== 'facts' && mode.type !== 'transcription')) {
    return { ok: false, type: 'CONFIG_DENIED', reason: "mode.type must be 'facts' or 'transcription'" };
  }
  if (mode.type === 'facts' && !nonEmpty(mode.outputLocale)) {
    return { ok: false, type: 'CONFIG_DENIED', reason: 'mode.outputLocale is required for facts' };
  }
  const interval = mode.factGenerationInterval;
  if (interval !== undefined && interval !== '' && interval !== 'fixed' && interval !== 'fast_init') {
    return { ok: false, type: 'CONFIG_DENIED', reason: 'mode.factGenerationInterval must be fixed or fast_init' };
  }
  const format = checkAudioFormat(c);
  if (format) return format;
  return {
    ok: true,
    resolved: {
      retentionPolicy: 'retain',
      ...c,
      transcription: {
        diarize: t.isDiarization === true,
        isMultichannel: false,
        wordLevel: { enabled: false },
        participants: [],
        ...t,
      },
      mode: { ...mode, factGenerationInterval: interval || 'fixed' },
      ...commonDefaults(c),
    },
  };
}
