// The gateway's socket to the upstream speech service (or the emulator), one per session: the
// session code sees open/message/close callbacks and nothing else (the client: ws-client.ts).
import type { UpstreamHandlers, UpstreamConnection, UpstreamOptions, UpstreamTarget } from './types.js';
import { UpstreamSocket } from './ws-client.js';

export type {
  UpstreamConnection,
  UpstreamHandlers,
  UpstreamLiveness,
  UpstreamOptions,
  UpstreamTarget,
} from './types.js';

export { UpstreamError } from './ws-client.js';

/** The upstream sends transcripts, facts and status messages; anything larger is a fault (close 1009). */
const MAX_UPSTREAM_MESSAGE_BYTES = 4 * 1024 * 1024;

export function upstreamUrl(t: UpstreamTarget): string {
  const base = t.wsBase.replace(/\/+$/, '');
  const path =
    t.endpoint === 'transcribe' ? '/transcribe' : `/interactions/${encodeURIComponent(t.interactionId ?? '')}/streams`;
  const q = new URLSearchParams({ 'tenant-name': t.tenant, token: `Bearer ${t.token}` });
  if (t.environment) q.set('environment', t.environment);
  return `${base}${path}?${q.toString()}`;
}

export function connectUpstream(t: UpstreamTarget, h: UpstreamHandlers, o: UpstreamOptions): UpstreamConnection {
  return new UpstreamSocket(upstreamUrl(t), h, { ...o, maxMessageBytes: MAX_UPSTREAM_MESSAGE_BYTES });
}
