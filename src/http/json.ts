import { isInteger, parse } from 'lossless-json';

// Integers become bigints, so an id keeps every digit; other numbers stay numbers.
const parseNumber = (text: string): bigint | number =>
  isInteger(text) ? BigInt(text) : Number(text);

/**
 * JSON.parse, but with integers as exact `bigint`s. Throws SyntaxError on malformed
 * input, including duplicate keys (which JSON.parse would silently resolve).
 */
export function parseJson(text: string): unknown {
  return parse(text, null, parseNumber);
}
