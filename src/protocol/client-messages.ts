// Client TEXT frames: config, flush, end (docs/protocol.md, 'Client messages'). Never throws; each
// failure is a catalogue error whose details say exactly what is wrong. The configuration itself is
// not checked here: validateConfig does that, so a bad or missing configuration gets CONFIG_DENIED.
// The text is bounded before JSON.parse; an oversized one is flagged `tooLarge` so the session can
// answer CONFIG_DENIED when it was waiting for a config.
import { z } from 'zod';
import { gatewayError, type GatewayError } from './errors.js';
import { echo } from './echo.js';

const configMessageSchema = z.object({ type: z.literal('config'), configuration: z.unknown() });
const flushMessageSchema = z.object({ type: z.literal('flush') });
const endMessageSchema = z.object({ type: z.literal('end') });

export const clientMessageSchema = z.discriminatedUnion('type', [
  configMessageSchema,
  flushMessageSchema,
  endMessageSchema,
]);
export type ClientMessage = z.infer<typeof clientMessageSchema>;
export type ClientMessageType = ClientMessage['type'];

const TYPES: readonly string[] = clientMessageSchema.options.map((o) => o.shape.type.value);

/** The largest text message the gateway reads: twice MAX_CONFIG_BYTES, room for the largest config with whitespace. */
export const MAX_CLIENT_TEXT_BYTES = 512 * 1024;

export type ParsedClientMessage =
  { ok: true; message: ClientMessage } | { ok: false; error: GatewayError; tooLarge?: true };

// V8: `Unexpected token 'x', "…input…" is not valid JSON`, the excerpt possibly cut with "...".
const V8_EXCERPT = /^Unexpected token '(.+?)', (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s;

/** V8's JSON.parse message with its excerpt of the input dropped and the offending character through echo. */
function jsonProblem(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const m = V8_EXCERPT.exec(msg);
  return m ? `Unexpected token ${echo(m[1])}` : msg;
}

/** UTF-8 size of `text` when over the limit (exact), else undefined; cheap for the usual short message. */
function oversize(text: string): number | undefined {
  if (text.length * 3 <= MAX_CLIENT_TEXT_BYTES) return undefined; // a UTF-16 unit is at most 3 UTF-8 bytes
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > MAX_CLIENT_TEXT_BYTES ? bytes : undefined;
}

function kind(v: unknown): string {
  if (v === null) return 'null';
  return Array.isArray(v) ? 'array' : typeof v;
}

/** The answer to a text of `bytes` UTF-8 bytes over the limit (callers holding raw bytes check first
 * and never decode it). */
export function oversizedText(bytes: number): ParsedClientMessage {
  const details = `message of ${bytes} bytes is larger than the ${MAX_CLIENT_TEXT_BYTES}-byte limit`;
  return { ok: false, error: gatewayError('INVALID_MESSAGE', details), tooLarge: true };
}

export function parseClientMessage(text: string): ParsedClientMessage {
  const bytes = oversize(text);
  if (bytes !== undefined) return oversizedText(bytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, error: gatewayError('INVALID_MESSAGE', `message is not valid JSON: ${jsonProblem(e)}`) };
  }
  if (kind(value) !== 'object') {
    return { ok: false, error: gatewayError('INVALID_MESSAGE', `message must be a JSON object (got ${kind(value)})`) };
  }
  const type = (value as Record<string, unknown>).type;
  if (type === undefined) return { ok: false, error: gatewayError('INVALID_MESSAGE', 'field "type" is required') };
  if (typeof type !== 'string') {
    return { ok: false, error: gatewayError('INVALID_MESSAGE', `field "type" must be a string (got ${kind(type)})`) };
  }
  if (!TYPES.includes(type)) {
    const expected = TYPES.map((t) => JSON.stringify(t)).join(', ');
    return {
      ok: false,
      error: gatewayError('UNKNOWN_MESSAGE_TYPE', `unknown message type ${echo(type)}; expected one of ${expected}`),
    };
  }
  // flush and end carry nothing: their message is the type alone (what the schema would strip them
  // to), without the schema's cost per frame, which a flood of them pays in one socket read.
  if (type !== 'config') return { ok: true, message: { type } as ClientMessage };
  const parsed = clientMessageSchema.safeParse(value);
  // Unreachable with the checks above; kept so a future field with rules fails precisely, not silently.
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: gatewayError('INVALID_MESSAGE', `field "${issue?.path.join('.')}": ${issue?.message}`) };
  }
  return { ok: true, message: parsed.data };
}
