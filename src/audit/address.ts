// Where a request came from, for the audit trail. X-Forwarded-For is a header anyone can send, so it
// is read only when the socket's peer is one of the operator's proxies (TRUSTED_PROXY_CIDRS, kept in
// node's BlockList); TRUSTED_PROXIES says how many proxies append to it. The peer itself is always
// recorded beside the address taken, so a wrong proxy setting shows in the trail.
import { BlockList, isIP } from 'node:net';

export interface Origin {
  /** the client's address as far as the gateway can trust it */
  address: string;
  /** the socket's peer (a proxy's address when there is one) */
  peer: string;
}

/** CIDR ranges (`10.0.0.0/8`, `fd00::/8`) or single addresses as one BlockList; none: undefined.
 * Throws a RangeError naming the entry for one that is neither. */
export function trustedProxyList(entries: readonly string[]): BlockList | undefined {
  if (entries.length === 0) return undefined;
  const list = new BlockList();
  for (const entry of entries) {
    const [address, prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix);
    const badPrefix = prefix !== undefined && !/^\d{1,3}$/.test(prefix);
    if (family === 0 || extra !== undefined || badPrefix || bits > (family === 6 ? 128 : 32))
      throw new RangeError(`"${entry}" is not an IP address or CIDR range`);
    list.addSubnet(address, bits, family === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

function isTrusted(peer: string, proxies: BlockList | undefined): boolean {
  const family = isIP(peer);
  return proxies !== undefined && family !== 0 && proxies.check(peer, family === 6 ? 'ipv6' : 'ipv4');
}

/** The client's address: the socket's peer; when that peer is a trusted proxy, the address the
 * outermost of `hops` proxies saw (the Nth from the right of X-Forwarded-For; the leftmost if fewer).
 * An entry that is no IP address is the client's own text (a miscounted proxy chain): `unknown`. */
export function clientAddress(
  peer: string,
  forwardedFor: string | undefined,
  hops: number,
  proxies: BlockList | undefined,
): string {
  if (hops <= 0 || !forwardedFor || !isTrusted(peer, proxies)) return peer;
  const entries = forwardedFor
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length === 0) return peer;
  const chosen = entries[Math.max(0, entries.length - hops)];
  return isIP(chosen) ? chosen : 'unknown';
}
