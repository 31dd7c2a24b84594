// Cross-site WebSocket hijacking guard: browsers always send Origin on a WebSocket handshake, so
// the Origin decides whether a page on another site may open a socket with a user's token.

export type OriginPolicy = string[] | 'same-origin' | '*';

/** Returns a predicate over (origin header, host header), with the policy normalised once. */
export function originChecker(policy: OriginPolicy): (origin: string | undefined, host: string | undefined) => boolean {
  if (policy === '*') return () => true;
  if (policy === 'same-origin') {
    return (origin, host) => {
      if (origin === undefined) return true; // not a browser
      const o = parseOrigin(origin);
      if (!o || !host) return false;
      return o.host === normaliseHost(host, o.protocol);
    };
  }
  const allowed = new Set(policy.map((p) => parseOrigin(p)?.origin ?? p.trim().toLowerCase().replace(/\/+$/, '')));
  return (origin) => {
    if (origin === undefined) return true; // not a browser
    const o = parseOrigin(origin);
    return o !== undefined && allowed.has(o.origin);
  };
}

/** URL normalises case and default ports; 'null' and garbage give undefined. */
function parseOrigin(value: string): URL | undefined {
  try {
    const u = new URL(value.trim().replace(/\/+$/, ''));
    return u.protocol === 'http:' || u.protocol === 'https:' ? u : undefined;
  } catch {
    return undefined;
  }
}

function normaliseHost(host: string, protocol: string): string {
  const h = host.trim().toLowerCase();
  const defaultPort = protocol === 'https:' ? ':443' : ':80';
  return h.endsWith(defaultPort) ? h.slice(0, -defaultPort.length) : h;
}
