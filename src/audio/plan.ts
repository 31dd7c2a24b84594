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

  switch (m.essence) {
    case 'audio/ogg':
      return pass(
        filterByCodecs(
          [
            ['ogg-opus', 'opus'],
            ['ogg-vorbis', 'vorbis'],
          ],
          codecs,
        ),
      );
    case 'audio/opus':
      return pass(
        filterByCodecs(
          [
            ['ogg-opus', 'opus'],
            ['webm-opus', 'opus'],
          ],
          codecs.length ? codecs : ['opus'],
        ),
      );
    case 'audio/vorbis':
      return pass(
        filterByCodecs(
          [
            ['ogg-vorbis', 'vorbis'],
            ['webm-vorbis', 'vorbis'],
          ],
          codecs.length ? codecs : ['vorbis'],
        ),
      );
    case 'audio/webm':
      if (codecs.length === 1 && codecs[0] === 'pcm') return transcode(['webm-pcm']);
      return pass(
        filterByCodecs(
          [
            ['webm-opus', 'opus'],
            ['webm-vorbis', 'vorbis'],
          ],
          codecs,
        ),
      );
    case 'audio/mpeg':
    case 'audio/mp3':
    case 'audio/mpeg3':
      return pass(filterByCodecs([['mp3', 'mp3']], codecs));
    case 'audio/flac':
    case 'audio/x-flac':
      return pass(filterByCodecs([['flac', 'flac']], codecs));
    case 'audio/mp4':
    case 'audio/m4a':
    case 'audio/x-m4a': {
      if (codecs.length === 1 && codecs[0] === 'opus') return transcode(['mp4-opus']);
      if (codecs.length === 0) {
        // A browser declaring plain audio/mp4 (Chromium's MediaRecorder) sends Opus, which the
        // upstream does not take: decide from the bytes and let the upstream auto-detect.
        return { ok: true, plan: { declared, mode: 'detect', expect: ['mp4-aac', 'mp4-mp3', 'mp4-opus'] } };
      }
      return pass(
        filterByCodecs(
          [
            ['mp4-aac', 'aac'],
            ['mp4-mp3', 'mp3'],
          ],
          codecs,
        ),
      );
    }
    case 'audio/wav':
    case 'audio/wave':
    case 'audio/x-wav':
    case 'audio/vnd.wave':
      return transcode(['wav']);
    case 'audio/pcm':
      return pcmParams(m, 's16le', declared);
    case 'audio/l16':
      return pcmParams(m, 's16be', declared);
    default:
      return { ok: false, reason: `unsupported audioFormat ${m.essence}` };
  }
}
