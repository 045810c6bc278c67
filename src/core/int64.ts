/** Smallest and largest values of a signed 64-bit integer. */
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

// Canonical decimal only: no sign on positives, no leading zeros, no "-0".
// One spelling per value keeps ids comparable as text in logs, headers and caches.
const CANONICAL_DECIMAL = /^(?:0|-?[1-9][0-9]{0,18})$/;

/** How messages and documents state the range. */
export const INT64_RANGE = `${INT64_MIN} to ${INT64_MAX}`;

export function isInt64(value: bigint): boolean {
  return value >= INT64_MIN && value <= INT64_MAX;
}

/**
 * Parses the canonical decimal form of an int64 (as used in paths, query strings and
 * headers). Returns `undefined` for anything else, including out-of-range values.
 *
 * @example parseInt64('-42') === -42n; parseInt64('042') === undefined
 */
export function parseInt64(text: string): bigint | undefined {
  if (!CANONICAL_DECIMAL.test(text)) return undefined;
  const value = BigInt(text);
  return isInt64(value) ? value : undefined;
}

/**
 * The int64 a decimal spells however it is spelt (`007`, `+5`, `-0` too); undefined for
 * anything else, and for values out of range.
 */
export function int64OfAnySpelling(value: string): bigint | undefined {
  if (!/^[+-]?\d{1,40}$/.test(value)) return undefined;
  const parsed = BigInt(value);
  return isInt64(parsed) ? parsed : undefined;
}

/**
 * What is wrong with `value`, a decimal that is an int64 spelt another way (`007`, `+5`,
 * `-0`) or one out of range, to follow the name of what it is ("The plant id is written
 * without leading zeros: 7, not 007"). Undefined for the canonical form and for anything
 * else (which the server does not echo): the caller then states the form.
 */
export function int64Spelling(value: unknown): string | undefined {
  if (typeof value !== 'string' || !/^[+-]?\d{1,40}$/.test(value)) return undefined;
  const parsed = int64OfAnySpelling(value);
  if (parsed === undefined) return `must be from ${INT64_RANGE}`;
  const fixed = parsed.toString();
  if (fixed === value) return undefined;
  if (value.startsWith('+')) return `is written without a plus sign: ${fixed}, not ${value}`;
  if (fixed === '0' && value.startsWith('-')) return `is written without a sign: 0, not ${value}`;
  return `is written without leading zeros: ${fixed}, not ${value}`;
}
