// MIME parsing for `audioFormat`, the gateway's one parser (audio/plan.ts reads declarations with
// it too). Hand-written: the only npm parsers (content-type, whatwg-mimetype) are not installed,
// and the grammar we need (type/subtype; k=v; k="v") fits in a few lines.

export interface AudioFormat {
  type: string;
  subtype: string;
  /** Parameter names and values lower-cased, quotes removed. */
  params: Record<string, string>;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/i;

/** Parses any syntactically valid MIME type (case-insensitive, parameters allowed); null when malformed.
 *  Whether the format is accepted is a separate question: see isUpstreamAudioFormat. */
export function parseAudioFormat(mime: string): AudioFormat | null {
  if (typeof mime !== 'string') return null;
  const [head, ...rest] = mime.split(';');
  // No space around the slash: "audio / ogg" is not a type the upstream takes.
  const essence = head.trim().toLowerCase();
  const slash = essence.indexOf('/');
  if (slash < 0) return null;
  const type = essence.slice(0, slash);
  const subtype = essence.slice(slash + 1);
  if (!TOKEN.test(type) || !TOKEN.test(subtype)) return null;
  const params: Record<string, string> = {};
  for (const part of rest) {
    if (part.trim() === '') continue; // tolerate "audio/webm;" and ";;"
    const eq = part.indexOf('=');
    if (eq < 0) return null;
    const name = part.slice(0, eq).trim().toLowerCase();
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!TOKEN.test(name) || value === '' || /[";]/.test(value)) return null;
    params[name] = value.toLowerCase();
  }
  return { type, subtype, params };
}

// What the upstream takes, and which codecs each type may name (docs/protocol.md, 'Accepted audio
// formats'); an empty list: no codecs parameter. Raw PCM and WAV are not taken at all.
const UPSTREAM_TYPES: Record<string, readonly string[]> = {
  ogg: ['opus', 'vorbis'],
  webm: ['opus', 'vorbis'],
  opus: ['opus'],
  vorbis: ['vorbis'],
  mpeg: [],
  mp3: [],
  mpeg3: [],
  flac: [],
  mp4: [],
  m4a: [],
};

/** True when the upstream accepts `mime` as is (no transcoding): the listed audio/* types, with at
 *  most a `codecs=opus|vorbis` parameter on the containers that carry them. */
export function isUpstreamAudioFormat(mime: string): boolean {
  const f = parseAudioFormat(mime);
  if (!f || f.type !== 'audio' || !Object.hasOwn(UPSTREAM_TYPES, f.subtype)) return false;
  const names = Object.keys(f.params);
  if (names.length === 0) return true;
  if (names.length > 1 || names[0] !== 'codecs') return false;
  return UPSTREAM_TYPES[f.subtype].includes(f.params.codecs);
}
