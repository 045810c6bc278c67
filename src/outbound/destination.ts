import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { AddressPolicy, refusalText, stripBrackets } from '../core/webhooks/address-policy.js';
import { type DestinationCheck, urlProblem } from '../core/webhooks/delivery.js';

/** Resolves a host name to all its addresses; injected so tests can rebind a name. */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

export const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => {
      if (error === null) resolve(addresses);
      else reject(error);
    });
  });

/** A destination the address policy refuses (server-side request forgery). */
export class UnsafeDestinationError extends Error {
  readonly code = 'EUNSAFEDESTINATION';
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeDestinationError';
  }
}

/**
 * The addresses of `host` a webhook may go to: all of them, or an UnsafeDestinationError if
 * any one is refused. A name with one private address among public ones is refused whole
 * rather than filtered: it points into the network, whatever else it points to.
 */
export async function allowedAddresses(
  host: string,
  policy: AddressPolicy,
  resolve: Resolve,
): Promise<LookupAddress[]> {
  const bare = stripBrackets(host);
  const family = isIP(bare);
  const addresses = family === 0 ? await resolve(bare) : [{ address: bare, family }];
  for (const { address } of addresses) {
    const verdict = policy.verdict(address);
    if (!verdict.allowed) throw new UnsafeDestinationError(refusalText(bare, address, verdict));
  }
  if (addresses.length === 0) throw new Error(`${bare} has no address`);
  return addresses;
}

/** Why a literal IP host is refused, or undefined (names are checked at connect time). */
export function literalRefusal(host: string, policy: AddressPolicy): string | undefined {
  const bare = stripBrackets(host);
  if (isIP(bare) === 0) return undefined;
  const verdict = policy.verdict(bare);
  return verdict.allowed ? undefined : refusalText(bare, bare, verdict);
}

/**
 * A `lookup` for node:net that resolves through the policy, so the connection goes only to
 * an address that was checked: the check is on the address connected to, not on an earlier
 * answer a rebinding name could change.
 */
export function guardedLookup(policy: AddressPolicy, resolve: Resolve): LookupFunction {
  return (hostname, options, callback) => {
    allowedAddresses(hostname, policy, resolve).then(
      (found) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : 0;
        const fitting = found.filter(({ family }) => wanted === 0 || family === wanted);
        if (fitting.length === 0) {
          callback(new Error(`${hostname} has no IPv${wanted} address`), '', 0);
        } else if (options.all === true) {
          callback(null, fitting);
        } else {
          callback(null, fitting[0]!.address, fitting[0]!.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, '', 0),
    );
  };
}

/** The subscription-time check of a URL: its form, then every address its host has now. */
export function destinationCheck(policy: AddressPolicy, resolve: Resolve): DestinationCheck {
  return async (text) => {
    const problem = urlProblem(text);
    if (problem !== undefined) return { ok: false, reason: problem };
    try {
      await allowedAddresses(new URL(text).hostname, policy, resolve);
      return { ok: true };
    } catch (error) {
      const reason =
        error instanceof UnsafeDestinationError
          ? error.message
          : `the webhook URL's host does not resolve (${describe(error)})`;
      return { ok: false, reason };
    }
  };
}

/** A short text for a network error: its message, or its code when it has none. */
export function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  if (error.message !== '') return error.message;
  return code ?? error.name;
}
