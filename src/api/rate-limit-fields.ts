import type { RateLimitPolicy } from '../core/rate-limit.js';

// The RateLimit-Policy and RateLimit response fields of draft-ietf-httpapi-ratelimit-headers
// (revision 11): each a Structured Field List (RFC 9651) of Items whose value is a String
// naming the policy, with Integer parameters:
//   RateLimit-Policy: "token";q=100000;w=60     q: quota, w: window in seconds
//   RateLimit: "token";r=99998;t=42             r: quota left, t: seconds until it is restored
// Neither `qu` (the default unit, requests, is ours) nor `pk` (the partition key: a token
// or an address, which we do not echo) is sent.

// sf-string: printable ASCII, with `"` and `\` escaped.
const SF_STRING = /^[\x20-\x7e]*$/;

function sfString(text: string): string {
  if (!SF_STRING.test(text)) throw new Error(`not a Structured Field String: ${text}`);
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

/** The RateLimit-Policy field value of one policy, e.g. `"token";q=100000;w=60`. */
export function policyField(policy: RateLimitPolicy): string {
  return `${sfString(policy.name)};q=${policy.quota};w=${policy.windowSeconds}`;
}

/**
 * Builds the RateLimit field value of one policy, e.g. `"token";r=42;t=30`; the name is
 * serialized once, as this runs on every request.
 */
export function limitField(policy: RateLimitPolicy): (remaining: number, reset: number) => string {
  const name = sfString(policy.name);
  return (remaining, reset) => `${name};r=${remaining};t=${reset}`;
}
