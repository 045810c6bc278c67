import { isInteger, parse } from 'lossless-json';

// Integers become bigints, so an id keeps every digit; other numbers stay numbers.
// `-0` stays a number too: as an id it is not the canonical spelling of 0.
const parseNumber = (text: string): bigint | number =>
  isInteger(text) && text !== '-0' ? BigInt(text) : Number(text);

// A lone UTF-16 surrogate (from an escape such as "\ud800") is not a Unicode character.
const LONE_SURROGATE = /\p{Cs}/u;

const checkStrings = (_key: string, value: unknown): unknown => {
  if (typeof value === 'string' && LONE_SURROGATE.test(value)) {
    throw new SyntaxError('a string holds an unpaired surrogate');
  }
  return value;
};

/**
 * JSON.parse, but with integers as exact `bigint`s. Throws SyntaxError on malformed
 * input, including duplicate keys (which JSON.parse would silently resolve) and strings
 * that are not well-formed Unicode.
 */
export function parseJson(text: string): unknown {
  return parse(text, checkStrings, parseNumber);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes a request body, refusing invalid UTF-8 instead of replacing it with U+FFFD. */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new SyntaxError('the body is not valid UTF-8');
  }
}
