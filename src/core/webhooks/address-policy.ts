import ipaddr from 'ipaddr.js';

/**
 * Which addresses a webhook may be sent to (OWASP API7, server-side request forgery).
 * Only public unicast addresses, unless an operator opens chosen networks with
 * `--webhook-allow-networks`. The classes come from ipaddr.js's tables of special ranges
 * (IANA's special-purpose registries), not from a table of our own.
 */

/** A network of `--webhook-allow-networks`, such as `127.0.0.0/8` or `::1/128`. */
export interface Network {
  readonly text: string;
  readonly range: [ipaddr.IPv4 | ipaddr.IPv6, number];
}

/**
 * IPv6 global unicast is 2000::/3 (RFC 4291 §2.4); ipaddr.js calls everything outside its
 * special ranges `unicast`, including the unassigned space outside 2000::/3.
 */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * The class of an address: `public`, or the name of the special range it is in (`loopback`,
 * `private`, `linkLocal`, `carrierGradeNat`, `uniqueLocal`, `multicast`, `unspecified`,
 * `reserved` (which holds the documentation ranges), ...). An IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.1`) is classed as the IPv4 address it maps. Throws if `text` is not
 * an IP address.
 */
export function addressClass(text: string): string {
  const address = canonical(ipaddr.parse(stripBrackets(text)));
  const range = address.range();
  if (range !== 'unicast') return range;
  if (address instanceof ipaddr.IPv6 && !address.match(GLOBAL_UNICAST_V6)) return 'unassigned';
  return 'public';
}

/** `[::1]`, as a URL's host writes it, is `::1`. */
export function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function canonical(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()
    ? address.toIPv4Address()
    : address;
}

/**
 * Parses a comma-separated CIDR list (`127.0.0.0/8,::1/128`). Throws with a message a user
 * can act on.
 */
export function parseNetworks(text: string): Network[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map((item) => {
      try {
        return { text: item, range: ipaddr.parseCIDR(item) };
      } catch {
        throw new Error(
          `"${item}" is not a network; use CIDR ranges such as 127.0.0.0/8 or ::1/128`,
        );
      }
    });
}

/** The verdict on one address a webhook would be sent to. */
export type AddressVerdict = { allowed: true } | { allowed: false; class: string };

/**
 * Decides on the addresses webhooks may reach: public ones, and any in `allowed`.
 * An IPv4-mapped IPv6 address is judged as the IPv4 address it maps, so that
 * `127.0.0.0/8` also opens `::ffff:127.0.0.1`.
 */
export class AddressPolicy {
  constructor(readonly allowed: readonly Network[] = []) {}

  verdict(text: string): AddressVerdict {
    let address: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      address = canonical(ipaddr.parse(stripBrackets(text)));
    } catch {
      return { allowed: false, class: 'not an IP address' };
    }
    if (this.allowed.some(({ range }) => matches(address, range))) return { allowed: true };
    const found = addressClass(address.toString());
    return found === 'public' ? { allowed: true } : { allowed: false, class: found };
  }
}

function matches(
  address: ipaddr.IPv4 | ipaddr.IPv6,
  [network, bits]: [ipaddr.IPv4 | ipaddr.IPv6, number],
): boolean {
  if (address instanceof ipaddr.IPv4 && network instanceof ipaddr.IPv4) {
    return address.match(network, bits);
  }
  if (address instanceof ipaddr.IPv6 && network instanceof ipaddr.IPv6) {
    return address.match(network, bits);
  }
  return false;
}

/** A sentence for a refusal, naming the address class but not the secret parts of a URL. */
export function refusalText(host: string, address: string, verdict: AddressVerdict): string {
  if (verdict.allowed) return '';
  const where = host === address ? address : `${host} (${address})`;
  return `${where} is not a public address (${verdict.class}); see --webhook-allow-networks`;
}
