// Classifies an upstream text message by its top-level `type`, on its bytes, without decoding or
// JSON.parse when it safely can: this runs on every upstream message, and most are relayed as bytes
// without being parsed. Hand-written because no library answers "first key only" questions about JSON.

const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COLON = 0x3a,
  OPEN_BRACE = 0x7b,
  CLOSE_BRACE = 0x7d;
/** The letters of "type"; as \u00XX escapes their hex digits are all decimal. */
const TYPE_LETTERS = [0x74, 0x79, 0x70, 0x65];

function skipWs(b: Buffer, i: number): number {
  for (;;) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
}

/** Does a key spelling "type", raw or with \u escapes ("t" = \u0074 ...), start at the quote at `i`? */
function typeKeyAt(b: Buffer, i: number): boolean {
  i++;
  for (const c of TYPE_LETTERS) {
    if (b[i] === c) i++;
    else if (
      b[i] === BACKSLASH &&
      b[i + 1] === 0x75 &&
      b[i + 2] === 0x30 &&
      b[i + 3] === 0x30 &&
      b[i + 4] === 0x30 + (c >> 4) &&
      b[i + 5] === 0x30 + (c & 15)
    )
      i += 6;
    else return false;
  }
  return b[i] === QUOTE;
}

/** The types every session gets, returned without decoding when the bytes spell one (others are decoded). */
const KNOWN = [
  'transcript',
  'delta_usage',
  'facts',
  'command',
  'flushed',
  'usage',
  'ended',
  'ENDED',
  'CONFIG_ACCEPTED',
];

function known(b: Buffer, start: number, end: number): string | undefined {
  next: for (const type of KNOWN) {
    if (type.length !== end - start) continue;
    for (let k = 0; k < type.length; k++) if (type.charCodeAt(k) !== b[start + k]) continue next;
    return type;
  }
  return undefined;
}

/** The type when the bytes start with {"type":"<plain string>" and nothing later could redefine it; else null. */
function fastPath(b: Buffer): string | null {
  let i = skipWs(b, 0);
  if (b[i] !== OPEN_BRACE) return null;
  i = skipWs(b, i + 1);
  if (
    b[i] !== QUOTE ||
    b[i + 1] !== 0x74 ||
    b[i + 2] !== 0x79 ||
    b[i + 3] !== 0x70 ||
    b[i + 4] !== 0x65 ||
    b[i + 5] !== QUOTE
  )
    return null;
  i = skipWs(b, i + 6);
  if (b[i] !== COLON) return null;
  i = skipWs(b, i + 1);
  if (b[i] !== QUOTE) return null;
  const start = i + 1;
  let end = start;
  for (let c = b[end]; c !== QUOTE; c = b[++end]) {
    if (c === BACKSLASH || c === undefined) return null; // escapes in the value, or no end: JSON.parse decides
  }
  // A message cut short is not JSON (the session does not pass it on): JSON.parse decides.
  let last = b.length - 1;
  while (b[last] === 0x20 || b[last] === 0x0a || b[last] === 0x0d || b[last] === 0x09) last--;
  if (b[last] !== CLOSE_BRACE) return null;
  // JSON.parse keeps the LAST duplicate key, so any later key that may spell "type" sends us to the slow path
  // (one pass in JS: cheaper than calls into Buffer.indexOf for messages of a few hundred bytes).
  for (let q = end + 1; q < b.length; q++) {
    if (b[q] === QUOTE && (b[q + 1] === 0x74 || b[q + 1] === BACKSLASH) && typeKeyAt(b, q)) return null;
  }
  return known(b, start, end) ?? b.toString('utf8', start, end);
}

function slowPath(b: Buffer): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(b.toString('utf8'));
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const type = (value as { type?: unknown }).type;
  return typeof type === 'string' ? type : undefined;
}

/** The top-level `type` of an upstream text message ('transcript', 'CONFIG_ACCEPTED', 'usage', ...);
 *  undefined when it has none, it is not a string, or the bytes are not a JSON object.
 *  Agrees with JSON.parse of the UTF-8 text for any valid JSON. */
export function upstreamMessageType(data: Buffer): string | undefined {
  return fastPath(data) ?? slowPath(data);
}
