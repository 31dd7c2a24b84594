// Config time: which declared audioFormat values the gateway takes, and what it tells the upstream.
import type { AudioPlan, PcmDeclaration, SourceKind } from './types.js';
import { parseAudioFormat } from '../protocol/index.js';
import { echo } from '../protocol/index.js';

export type PlanResult = { ok: true; plan: AudioPlan } | { ok: false; reason: string };

const TRANSCODED_UPSTREAM = 'audio/ogg;codecs=opus';

/** A parsed declaration: the essence (`type/subtype`), parameters lower-cased and unquoted. */
interface Mime {
  essence: string;
  params: Record<string, string>;
}

/** Codecs parameter → normalized codec names; undefined for a codec we don't know. */
function codecNames(v: string | undefined): string[] | undefined {
  if (v === undefined) return [];
  const out: string[] = [];
  for (const raw of v.split(',')) {
    const c = raw.trim().toLowerCase();
    if (c === 'opus') out.push('opus');
    else if (c === 'vorbis') out.push('vorbis');
    else if (c === 'pcm' || c === '1') out.push('pcm');
    else if (c === 'aac' || /^mp4a\.40(\.\d+)?$/.test(c) || c === 'mp4a') out.push('aac');
    else if (c === 'mp3' || c === 'mp4a.6b' || c === 'mp4a.69' || c === 'mp4a.40.34') out.push('mp3');
    else if (c === 'flac') out.push('flac');
    else return undefined;
  }
  return out;
}

function pcmParams(m: Mime, defaultEncoding: PcmDeclaration['encoding'], declared: string): PlanResult {
  const rate = Number(m.params.rate);
  const channels = Number(m.params.channels ?? '1');
  if (m.params.rate === undefined || !Number.isInteger(rate) || rate < 8000 || rate > 192000) {
    return { ok: false, reason: `${m.essence} needs rate=R (an integer sample rate, 8000 to 192000)` };
  }
  // The Opus encoder behind the transcoder (mapping family 0) takes mono or stereo.
  if (!Number.isInteger(channels) || channels < 1 || channels > 2) {
    return { ok: false, reason: `${m.essence} channels must be 1 or 2` };
  }
  let encoding = defaultEncoding;
  const enc = m.params.encoding;
  if (enc !== undefined) {
    if (m.essence === 'audio/l16')
      return { ok: false, reason: 'audio/L16 is 16-bit big-endian; it takes no encoding parameter' };
    if (enc !== 's16le' && enc !== 'f32le')
      return { ok: false, reason: `unsupported PCM encoding ${echo(enc)} (s16le or f32le)` };
    encoding = enc;
  }
  return {
    ok: true,
    plan: {
      declared,
      mode: 'transcode',
      upstreamAudioFormat: TRANSCODED_UPSTREAM,
      pcm: { sampleRate: rate, channels, encoding },
      expect: ['pcm'],
    },
  };
}

function filterByCodecs(kinds: Array<[SourceKind, string]>, codecs: string[]): SourceKind[] {
  if (codecs.length === 0) return kinds.map(([k]) => k);
  return kinds.filter(([, c]) => codecs.includes(c)).map(([k]) => k);
}

const MP4 = ['audio/mp4', 'audio/m4a', 'audio/x-m4a'];
const WAV = ['audio/wav', 'audio/wave', 'audio/x-wav', 'audio/vnd.wave'];

/** The types that pass through: which source kinds each may carry, by codec, and the codec a bare type
 *  implies (none: a bare type may carry any of its kinds). */
const CARRIES: Record<string, { kinds: Array<[SourceKind, string]>; implied?: string }> = {
  'audio/ogg': {
    kinds: [
      ['ogg-opus', 'opus'],
      ['ogg-vorbis', 'vorbis'],
    ],
  },
  'audio/opus': {
    kinds: [
      ['ogg-opus', 'opus'],
      ['webm-opus', 'opus'],
    ],
    implied: 'opus',
  },
  'audio/vorbis': {
    kinds: [
      ['ogg-vorbis', 'vorbis'],
      ['webm-vorbis', 'vorbis'],
    ],
    implied: 'vorbis',
  },
  'audio/webm': {
    kinds: [
      ['webm-opus', 'opus'],
      ['webm-vorbis', 'vorbis'],
    ],
  },
  'audio/mpeg': { kinds: [['mp3', 'mp3']] },
  'audio/mp3': { kinds: [['mp3', 'mp3']] },
  'audio/mpeg3': { kinds: [['mp3', 'mp3']] },
  'audio/flac': { kinds: [['flac', 'flac']] },
  'audio/x-flac': { kinds: [['flac', 'flac']] },
  ...Object.fromEntries(
    MP4.map((t) => [
      t,
      {
        kinds: [
          ['mp4-aac', 'aac'],
          ['mp4-mp3', 'mp3'],
        ] as Array<[SourceKind, string]>,
      },
    ]),
  ),
};

/** Can the gateway take this declared format? What goes upstream? */
export function planAudio(declared: string | undefined): PlanResult {
  if (declared === undefined || declared.trim() === '') return { ok: true, plan: { mode: 'detect' } };
  const f = parseAudioFormat(declared);
  if (!f) return { ok: false, reason: `audioFormat ${echo(declared)} is not a MIME type` };
  const m: Mime = { essence: `${f.type}/${f.subtype}`, params: f.params };
  const codecsParam = m.params.codecs;
  const codecs = codecNames(codecsParam);
  if (!codecs) return { ok: false, reason: `unsupported codecs ${echo(codecsParam ?? '')} in audioFormat` };
  const pass = (expect: SourceKind[]): PlanResult =>
    expect.length === 0
      ? { ok: false, reason: `${m.essence} cannot carry codecs ${echo(codecsParam ?? '')}` }
      : { ok: true, plan: { declared, mode: 'passthrough', upstreamAudioFormat: declared, expect } };
  const transcode = (expect: SourceKind[]): PlanResult => ({
    ok: true,
    plan: { declared, mode: 'transcode', upstreamAudioFormat: TRANSCODED_UPSTREAM, expect },
  });

  const carried = CARRIES[m.essence];
  if (m.essence === 'audio/webm' && codecs.length === 1 && codecs[0] === 'pcm') return transcode(['webm-pcm']);
  if (MP4.includes(m.essence)) {
    if (codecs.length === 1 && codecs[0] === 'opus') return transcode(['mp4-opus']);
    // A browser declaring plain audio/mp4 (Chromium's MediaRecorder) sends Opus, which the upstream
    // does not take: decide from the bytes and let the upstream auto-detect.
    if (codecs.length === 0)
      return { ok: true, plan: { declared, mode: 'detect', expect: ['mp4-aac', 'mp4-mp3', 'mp4-opus'] } };
  }
  if (carried)
    return pass(filterByCodecs(carried.kinds, codecs.length || !carried.implied ? codecs : [carried.implied]));
  if (WAV.includes(m.essence)) return transcode(['wav']);
  if (m.essence === 'audio/pcm') return pcmParams(m, 's16le', declared);
  if (m.essence === 'audio/l16') return pcmParams(m, 's16be', declared);
  return { ok: false, reason: `unsupported audioFormat ${m.essence}` };
}
