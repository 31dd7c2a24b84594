// Client TEXT frames: config, flush, end (spec 4.12 "Client messages"). Never throws; each failure
// is a catalogue error whose details say exactly what is wrong. The configuration itself is not
// checked here: validateConfig does that, so a bad or missing configuration gets CONFIG_DENIED.
import { z } from 'zod';
import { gatewayError, type GatewayError } from './errors.js';

const configMessageSchema = z.object({ type: z.literal('config'), configuration: z.unknown() });
const flushMessageSchema = z.object({ type: z.literal('flush') });
const endMessageSchema = z.object({ type: z.literal('end') });

export const clientMessageSchema = z.discriminatedUnion('type', [configMessageSchema, flushMessageSchema, endMessageSchema]);
export type ClientMessage = z.infer<typeof clientMessageSchema>;
export type ClientMessageType = ClientMessage['type'];

const TYPES: readonly string[] = clientMessageSchema.options.map((o) => o.shape.type.value);

export type ParsedClientMessage = { ok: true; message: ClientMessage } | { ok: false; error: GatewayError };

/** V8's JSON.parse message without its quoted excerpt of the input (it could hold anything the client typed). */
function jsonProblem(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.replace(/, ".*" is not valid JSON$/s, ' (not valid JSON)');
}

function kind(v: unknown): string {
  if (v === null) return 'null';
  return Array.isArray(v) ? 'array' : typeof v;
}

export function parseClientMessage(text: string): ParsedClientMessage {
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
      error: gatewayError('UNKNOWN_MESSAGE_TYPE', `unknown message type ${JSON.stringify(type.slice(0, 40))}; expected one of ${expected}`),
    };
  }
  const parsed = clientMessageSchema.safeParse(value);
  // Unreachable with the checks above; kept so a future field with rules fails precisely, not silently.
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: gatewayError('INVALID_MESSAGE', `field "${issue?.path.join('.')}": ${issue?.message}`) };
  }
  return { ok: true, message: parsed.data };
}
