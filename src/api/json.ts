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

/**
 * Bounds on the shape of a JSON body, checked before it is parsed: no operation takes more
 * than a flat object, and these keep a parser's recursion and allocation small whatever a
 * client sends.
 */
export const JSON_LIMITS = { depth: 16, arrayItems: 1000 } as const;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * What in the text exceeds JSON_LIMITS, as a phrase for the error message; undefined when
 * nothing does. Malformed JSON is left for the parser to refuse.
 */
export function shapeViolation(text: string): string | undefined {
  // One entry per open container: commas seen so far in an array, -1 for an object.
  const open: number[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (open.length === JSON_LIMITS.depth) {
        return `it nests deeper than ${JSON_LIMITS.depth} levels`;
      }
      open.push(c === OPEN_ARRAY ? 0 : -1);
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      open.pop();
    } else if (c === COMMA && open.length > 0 && open[open.length - 1]! >= 0) {
      // n commas separate n + 1 items.
      if (++open[open.length - 1]! >= JSON_LIMITS.arrayItems) {
        return `an array has more than ${JSON_LIMITS.arrayItems} items`;
      }
    }
  }
  return undefined;
}
