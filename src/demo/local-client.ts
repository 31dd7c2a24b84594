// Whether a request for the development token comes from a browser on this machine talking to the
// gateway directly. The socket's peer alone does not say so: a reverse proxy on the same host (or a
// mesh sidecar) connects from loopback on behalf of clients anywhere. So three things must hold: the
// peer is 127.0.0.1 or ::1, no proxy's forwarding header is present, and the Host is a loopback
// name. A forwarder that adds no header and keeps a loopback Host (socat, `ssh -L`, `kubectl
// port-forward`) still looks local: whoever reaches it gets tokens, as docs/security.md says.
import type uWS from 'uWebSockets.js';

/** 127.0.0.1, ::1, and 127.0.0.1 mapped into IPv6, as uWS writes them (IPv6 as eight groups of four
 *  hex digits). Not the rest of 127.0.0.0/8: a browser reaches `localhost` on 127.0.0.1 or ::1, while
 *  other loopback addresses are what local forwarders connect from for someone else (a mesh
 *  sidecar's inbound hop comes from 127.0.0.6). */
const LOCAL_PEERS = new Set([
  '127.0.0.1',
  '0000:0000:0000:0000:0000:0000:0000:0001',
  '0000:0000:0000:0000:0000:ffff:7f00:0001',
]);

/** Headers proxies add when they pass a request on (standard, de facto and vendors'). */
const FORWARDING = new Set([
  'forwarded',
  'via',
  'x-real-ip',
  'x-client-ip',
  'client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
]);
/** x-forwarded-for/-host/-proto/-client-cert...; Envoy's own (a sidecar adds x-envoy-* headers). */
const FORWARDING_PREFIXES = ['x-forwarded-', 'x-envoy-'];

/** A page on this machine is opened by one of these names: another one is a page served under a
 *  name that resolves here (DNS rebinding) or a proxy passing its public Host on. */
function loopbackHost(host: string): boolean {
  const name = host.replace(/:\d+$/, '').toLowerCase();
  return name === 'localhost' || name.endsWith('.localhost') || name === '127.0.0.1' || name === '[::1]';
}

function forwarded(req: uWS.HttpRequest): boolean {
  let found = false;
  req.forEach((key) => {
    if (FORWARDING.has(key) || FORWARDING_PREFIXES.some((p) => key.startsWith(p))) found = true;
  });
  return found;
}

/** `peer` is uWS's text of the socket's remote address; `req` is read during the handler only. */
export function isLocalBrowser(peer: string, req: uWS.HttpRequest): boolean {
  return LOCAL_PEERS.has(peer.toLowerCase()) && !forwarded(req) && loopbackHost(req.getHeader('host'));
}
