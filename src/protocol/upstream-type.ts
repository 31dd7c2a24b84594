// Classifies an upstream text message by its top-level `type` without JSON.parse when it safely can:
// this runs on every upstream message, and most are relayed as bytes without being parsed.
// Hand-written because no library answers "first key only" questions about JSON text.

/** A top-level key spelling "type", raw or with \u escapes ("t" = \u0074 ...); hex digits here are all decimal. */
const TYPE_KEY = /"(?:t|\\u0074)(?:y|\\u0079)(?:p|\\u0070)(?:e|\\u0065)"/g;

function skipWs(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
}

/** The type when the text starts with {"type":"<plain string>" and nothing later could redefine it; else null. */
function fastPath(text: string): string | null {
  let i = skipWs(text, 0);
  if (text.charCodeAt(i) !== 0x7b /* { */) return null;
  i = skipWs(text, i + 1);
  if (!text.startsWith('"type"', i)) return null;
  i = skipWs(text, i + 6);
  if (text.charCodeAt(i) !== 0x3a /* : */) return null;
  i = skipWs(text, i + 1);
  if (text.charCodeAt(i) !== 0x22 /* " */) return null;
  const end = text.indexOf('"', i + 1);
  if (end < 0) return null;
  const value = text.slice(i + 1, end);
  if (value.includes('\\')) return null; // escapes in the value: let JSON.parse decode it
  // JSON.parse keeps the LAST duplicate key, so any later key that may spell "type" sends us to the slow path.
  // A plain indexOf settles the common case; the regex only runs when \u escapes are present at all.
  if (text.indexOf('"type"', end + 1) >= 0) return null;
  if (text.indexOf('\\u00', end + 1) >= 0) {
    TYPE_KEY.lastIndex = end + 1;
    if (TYPE_KEY.test(text)) return null;
  }
  return value;
}

function slowPath(text: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const type = (value as { type?: unknown }).type;
  return typeof type === 'string' ? type : undefined;
}

/** The top-level `type` of an upstream text message ('transcript', 'CONFIG_ACCEPTED', 'usage', ...);
 *  undefined when it has none, it is not a string, or the text is not a JSON object.
 *  Agrees with JSON.parse for any valid JSON. */
export function upstreamMessageType(text: string): string | undefined {
  return fastPath(text) ?? slowPath(text);
}
