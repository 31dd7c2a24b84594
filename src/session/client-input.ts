// A client's text message, read once into what the session does with it: a config to check (the
// session's first), a resuming socket's config (compared with the session's), or a machine event.
import { MAX_CLIENT_TEXT_BYTES, oversizedText, parseClientMessage } from '../protocol/index.js';
import type { SessionEvent, SessionState } from './machine.js';

export type ClientText =
  | { kind: 'config'; configuration: unknown }
  | { kind: 'resume_config'; configuration: unknown }
  | { kind: 'event'; event: SessionEvent };

/** `text` is uWS's buffer (valid during its callback): a text over the limit is never decoded. */
export function readClientText(text: ArrayBuffer, s: SessionState): ClientText {
  const parsed =
    text.byteLength > MAX_CLIENT_TEXT_BYTES
      ? oversizedText(text.byteLength)
      : parseClientMessage(Buffer.from(text).toString('utf8'));
  if (!parsed.ok && parsed.tooLarge && s.phase === 'awaiting_config') {
    // Only a config can be that large: it is denied, as any config over its bounds is.
    const reason = `configuration: ${parsed.error.details}`;
    const message = { type: 'config' as const, configuration: undefined };
    return {
      kind: 'event',
      event: { type: 'client_message', message, verdict: { ok: false, status: 'denied', reason } },
    };
  }
  if (!parsed.ok)
    return {
      kind: 'event',
      event: { type: 'client_invalid', errorId: parsed.error.id, details: parsed.error.details },
    };
  const message = parsed.message;
  if (message.type === 'config' && s.client === 'resuming')
    return { kind: 'resume_config', configuration: message.configuration };
  if (message.type === 'config' && s.phase === 'awaiting_config')
    return { kind: 'config', configuration: message.configuration };
  return { kind: 'event', event: { type: 'client_message', message } };
}
