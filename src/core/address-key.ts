import { isIPv4, isIPv6 } from 'node:net';

/**
 * The key a client address is counted under by the failed-authentication limit and by the
 * sharing of connections at the limit (src/http/connection-room.ts):
 * - an IPv4 address as is (an IPv4-mapped IPv6 address, `::ffff:192.0.2.1`, as its IPv4);
 * - an IPv6 address by its /64 prefix, `2001:db8:0:1::/64`: a single host is commonly
 *   given a whole /64, and counting each of its 2^64 addresses apart would limit nothing;
 * - anything else (no address known) as `unknown`.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped !== null && isIPv4(mapped[1]!)) return mapped[1]!;
  if (isIPv4(address)) return address;
  const bare = address.split('%', 1)[0]!;
  if (!isIPv6(bare)) return 'unknown';
  return `${hextets(bare).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address, lower case, without leading zeros. */
function hextets(address: string): string[] {
  let text = address.toLowerCase();
  // A trailing dotted quad (`::ffff:1.2.3.4`, `64:ff9b::1.2.3.4`) is two groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad !== null) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => parseInt(group, 16).toString(16));
}
