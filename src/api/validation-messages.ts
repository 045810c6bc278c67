import type { ErrorObject } from 'ajv';
import { INT64_MAX, INT64_RANGE, int64Spelling } from '../core/int64.js';
import { PLANT_LIMITS } from '../core/plant.js';

// What a refused input is told, in the API's words: which field, what it must be, and what
// to send instead. Never a regular expression or a validator's phrase ("must match pattern
// ...", "must NOT have fewer than 1 characters"), which a client can act on only by
// reading the schema.

/** The part of the request a validator checks. */
export type Part = 'params' | 'querystring' | 'body';

/** Whose operation it is: the ids in its path and what its body describes. */
export type Owner = 'plants' | 'webhooks';

type Schema = Record<string, unknown>;

/** Where the input was refused, with what the message needs to know of it. */
export interface Refusal {
  part: Part;
  owner: Owner;
  /** The request's method: a create and a merge patch say different things of a field. */
  method: string;
  /** The properties of the part's schema, by name. */
  properties: Record<string, Schema>;
  /** The first error of the validator; undefined when it gave none. */
  error: ErrorObject | undefined;
  /** The value validated (path and query values as strings where they did not convert). */
  value: unknown;
}

/**
 * A schema's own words for a value it refuses, where its constraint (a pattern) has none a
 * client could act on: the sentence the answer's message is. An annotation Ajv is taught
 * (http/validation.ts); published in the OpenAPI document as an extension.
 */
export const REFUSAL_KEYWORD = 'x-refusal';

const EXAMPLE_BODY = '{"name": "Fern", "tag": "shade"}';
const NUL = '\u0000';

const PATH_IDS: Record<Owner, Record<string, string>> = {
  plants: { id: 'The plant id' },
  webhooks: { id: 'The webhook endpoint id', deliveryId: 'The delivery id' },
};

const RESOURCE: Record<Owner, string> = { plants: 'a plant', webhooks: 'a webhook endpoint' };

/** The message for an input the schema refused. */
export function validationMessage(refusal: Refusal): string {
  const { error, part } = refusal;
  if (part === 'params') return pathIdMessage(refusal);
  if (error === undefined) return `The ${partName(part)} is invalid.`;
  const { additionalProperty, missingProperty } = error.params as Record<string, string>;
  if (additionalProperty !== undefined) return unknownProperty(refusal, additionalProperty);
  if (missingProperty !== undefined) return missing(refusal.owner, missingProperty);
  const field = error.instancePath.slice(1);
  if (field === '') {
    const example = refusal.owner === 'plants' ? `, such as ${EXAMPLE_BODY}` : '';
    return `The ${partName(part)} must be a JSON object${example}.`;
  }
  if (refusal.owner === 'plants' && field === 'name') return nameMessage(refusal);
  if (refusal.owner === 'plants' && field === 'tag') return tagMessage(refusal);
  return fieldMessage(refusal, field);
}

function partName(part: Part): string {
  return part === 'body' ? 'request body' : 'query';
}

/** The value the error is about, found by its JSON pointer. */
function valueAt({ value, error }: Refusal): unknown {
  const path = error?.instancePath.split('/').slice(1) ?? [];
  let at: unknown = value;
  for (const key of path) at = (at as Record<string, unknown> | undefined)?.[key];
  return at;
}

function unknownProperty({ part, method, owner, properties }: Refusal, name: string): string {
  const shown = JSON.stringify(name.length > 100 ? `${name.slice(0, 100)}...` : name);
  const known = list(Object.keys(properties));
  if (part === 'querystring') {
    return known === ''
      ? `This operation takes no query parameters; ${shown} is not one.`
      : `Unknown query parameter ${shown}: this operation takes ${known}.`;
  }
  if (method === 'PATCH' && name === 'id') return 'id cannot be changed; it is in the path.';
  const holder = method === 'PATCH' ? 'a patch may change' : `${RESOURCE[owner]} has`;
  return `Unknown property ${shown}: ${holder} ${known}.`;
}

function missing(owner: Owner, name: string): string {
  if (owner === 'plants' && name === 'name') {
    return `name is required: a plant has a name of 1 to ${PLANT_LIMITS.nameMaxLength} characters.`;
  }
  return `${name} is required.`;
}

/** `a`, `a and b`, `a, b and c` (or `or`). */
function list(names: readonly string[], conjunction = 'and'): string {
  return names.length < 2
    ? names.join('')
    : `${names.slice(0, -1).join(', ')} ${conjunction} ${names.at(-1)!}`;
}

function nameMessage(refusal: Refusal): string {
  const value = valueAt(refusal);
  if (typeof value !== 'string') {
    return value === null && refusal.method === 'PATCH'
      ? 'name cannot be removed: every plant has one; send a new name or leave name out.'
      : 'name must be a string.';
  }
  if (refusal.error?.keyword === 'maxLength') {
    return tooLong('name', value, PLANT_LIMITS.nameMaxLength);
  }
  if (value.includes(NUL)) return 'name must not contain U+0000 (the null character).';
  return (
    'name must contain a non-blank character: white space, control and format characters ' +
    'alone are not a name.'
  );
}

function tagMessage(refusal: Refusal): string {
  const value = valueAt(refusal);
  const patch = refusal.method === 'PATCH';
  if (typeof value !== 'string') {
    if (patch) return 'tag must be a string, or null to remove the tag.';
    return value === null
      ? 'tag must be a string; for a plant without a tag, leave tag out.'
      : 'tag must be a string.';
  }
  if (refusal.error?.keyword === 'maxLength') {
    return tooLong('tag', value, PLANT_LIMITS.tagMaxLength);
  }
  if (value.includes(NUL)) return 'tag must not contain U+0000 (the null character).';
  if (refusal.part === 'querystring') {
    return 'tag must not be empty; leave the parameter out to list plants of every tag.';
  }
  return patch
    ? 'tag must not be empty; send null to remove the tag.'
    : 'tag must not be empty; omit it instead.';
}

function tooLong(field: string, value: string, max: number): string {
  // Counted as the schema counts: code points, not UTF-16 units.
  return `${field} is ${[...value].length} characters long; at most ${max} are allowed.`;
}

/** Any other field, in words from its schema: `events[0]`, `limit`, `url`, `id`, ... */
function fieldMessage(refusal: Refusal, field: string): string {
  const [top = '', ...indexes] = field.split('/');
  const name = top + indexes.map((index) => `[${index}]`).join('');
  let schema = refusal.properties[top];
  if (indexes.length > 0) schema = schema?.items as Schema | undefined;
  const value = valueAt(refusal);
  const { keyword, params } = refusal.error!;
  const limit = (params as { limit?: number }).limit;
  if (schema?.type === 'integer' && schema.minimum !== undefined && schema.maximum !== undefined) {
    return `${name} must be a whole number from ${schema.minimum as number} to ${schema.maximum as number}.`;
  }
  if (keyword === 'x-int64') return int64Message(refusal, name, value, wordsOf(schema));
  if (keyword === 'type')
    return `${name} must be ${typeWords((params as { type: unknown }).type)}.`;
  if (keyword === 'minLength' && limit === 1) return `${name} must not be empty.`;
  if (keyword === 'maxLength' && typeof value === 'string') return tooLong(name, value, limit!);
  if (keyword === 'minItems') return `${name} must list at least ${limit}.`;
  if (keyword === 'maxItems') return `${name} must list at most ${limit}.`;
  if (keyword === 'uniqueItems') return `${name} must not list the same value twice.`;
  if (typeof value === 'string' && value.includes(NUL)) {
    return `${name} must not contain U+0000 (the null character).`;
  }
  const allowed = allowedValues(schema);
  if (allowed.length > 0) return `${name} must be one of ${list(allowed, 'or')}.`;
  const own = schema?.[REFUSAL_KEYWORD];
  if (typeof own === 'string') return own;
  return `${name} is not valid: see ${refusal.part === 'body' ? 'its schema' : 'its description'} in /openapi.json.`;
}

/**
 * The words an int64 field also takes (the feed's `after`: a position, or `now`): Ajv reports
 * such a choice by its int64 branch's error.
 */
const wordsOf = (schema: Schema | undefined): string[] =>
  ((schema?.anyOf ?? []) as Schema[]).flatMap((choice) =>
    typeof choice.const === 'string' ? [choice.const] : [],
  );

function int64Message(
  { part, owner }: Refusal,
  name: string,
  value: unknown,
  words: string[],
): string {
  if (part === 'body') {
    return typeof value === 'string'
      ? `${name} must be a JSON integer, not a string: no quotes around it.`
      : `${name} must be an integer from ${INT64_RANGE}.`;
  }
  const spelling = int64Spelling(value);
  if (spelling !== undefined) return `${name} ${spelling}.`;
  // Only the feed's `after` takes words, a position: never below 0.
  if (words.length > 0) {
    return `${name} must be a decimal integer from 0 to ${INT64_MAX}, or ${list(words, 'or')}.`;
  }
  const id = owner === 'plants' ? 'a plant id' : 'an id';
  return `${name} must be ${id}: a decimal integer from ${INT64_RANGE}.`;
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  array: 'an array',
  object: 'a JSON object',
  null: 'null',
};

function typeWords(type: unknown): string {
  const types = [type].flat().map((name) => TYPE_WORDS[String(name)] ?? String(name));
  return types.join(' or ');
}

/** The values an enumeration allows: `enum`, `const`, or a union of `const`s. */
function allowedValues(schema: Schema | undefined): string[] {
  if (schema === undefined) return [];
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  if (schema.const !== undefined) return [String(schema.const)];
  const union = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  return union?.flatMap(allowedValues) ?? [];
}

function pathIdMessage(refusal: Refusal): string {
  const field = refusal.error?.instancePath.slice(1) ?? 'id';
  const noun = PATH_IDS[refusal.owner][field] ?? PATH_IDS[refusal.owner].id!;
  const spelling = int64Spelling(valueAt(refusal));
  return spelling === undefined
    ? `${noun} must be a decimal integer from ${INT64_RANGE}.`
    : `${noun} ${spelling}.`;
}
