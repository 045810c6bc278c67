import { isInteger, isLosslessNumber, parse, stringify } from 'lossless-json';

/**
 * Where int64 values sit in a JSON value: `int64` at this position itself, or below it in
 * named properties, array items, or the values of any other property. Generated from the
 * OpenAPI document (int64-shapes.ts), so the parser knows which integers are ids.
 */
export interface Int64Shape {
  int64?: true;
  properties?: Record<string, Int64Shape>;
  items?: Int64Shape;
  additional?: Int64Shape;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function number(text: string, int64: boolean): bigint | number {
  if (isInteger(text)) {
    const value = BigInt(text);
    // Outside a known int64 position a number stays a number, unless a JS number cannot
    // hold it: then a bigint, since a wrong type is better than silently wrong digits.
    if (int64 || value > MAX_SAFE || value < -MAX_SAFE) return value;
  }
  return Number(text);
}

function propertyShape(shape: Int64Shape | undefined, key: string): Int64Shape | undefined {
  const named = shape?.properties;
  return named && Object.hasOwn(named, key) ? named[key] : shape?.additional;
}

function convert(value: unknown, shape: Int64Shape | undefined): unknown {
  if (isLosslessNumber(value)) return number(value.value, shape?.int64 === true);
  if (Array.isArray(value)) return value.map((item) => convert(item, shape?.items));
  if (value === null || typeof value !== 'object') return value;
  // fromEntries defines own properties: a "__proto__" key stays data, not a prototype.
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, convert(item, propertyShape(shape, key))]),
  );
}

/**
 * JSON.parse without losing digits: every number at an int64 position of `shape` becomes a
 * `bigint`, every other number a `number`. Throws SyntaxError on malformed JSON and on
 * duplicate keys.
 */
export function parseBody(text: string, shape?: Int64Shape): unknown {
  return convert(parse(text), shape);
}

/** JSON.stringify, but bigints are written as JSON integers with every digit. */
export function stringifyBody(value: unknown): string {
  const text = stringify(value);
  if (text === undefined) throw new TypeError('the value has no JSON form');
  return text;
}
