import type { ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { ApiError, type ErrorName } from '../core/errors.js';
import { parseInt64 } from '../core/int64.js';
import { addInt64Keyword, describesInt64, forBigIntValidation } from '../api/int64-schema.js';
import {
  type Owner,
  type Part,
  REFUSAL_KEYWORD,
  type Refusal,
  validationMessage,
} from '../api/validation-messages.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

/**
 * An Ajv for JSON Schema 2020-12 (the dialect of OpenAPI 3.1) that knows int64 bigints.
 * `checkSchemas: false` compiles schemas without first validating them against the
 * dialect's meta-schema (strict mode still refuses unknown keywords).
 */
export function createAjv(
  options: { useDefaults?: boolean; checkSchemas?: boolean } = {},
): Ajv2020 {
  const ajv = new Ajv2020({
    allErrors: false,
    coerceTypes: false,
    useDefaults: options.useDefaults ?? false,
    allowUnionTypes: true,
    strict: true,
    validateSchema: options.checkSchemas ?? true,
  });
  addFormats(ajv, ['int32']);
  addInt64Keyword(ajv);
  // Words for the refusal message only (validation-messages.ts): nothing to check.
  ajv.addKeyword({ keyword: REFUSAL_KEYWORD, schemaType: 'string' });
  return ajv;
}

// The route schemas are ours and fixed: test/unit/route-schemas.test.ts holds each to the
// meta-schema. Checking them again at every start compiled the meta-schema first, 55 of the
// 120 ms that compiling the routes' validators took a start (bench/HISTORY.md).
const ajv = createAjv({ useDefaults: true, checkSchemas: false });

const errorForPart: Record<string, ErrorName> = {
  params: 'malformedPlantId',
  querystring: 'invalidQuery',
  body: 'invalidBody',
};

type Coerce = (data: unknown) => unknown;

const DECIMAL = /^(?:0|-?[1-9][0-9]{0,14})$/;

/**
 * Path and query values arrive as strings; turn each into the type its schema names,
 * strictly (canonical decimals only). A value that does not convert is left as it is,
 * for the validator to reject with its own message.
 */
function stringCoercer(schema: { properties?: Record<string, unknown> }): Coerce {
  const properties = Object.entries(schema.properties ?? {});
  return (data) => {
    // A null-prototype copy: a `__proto__` key stays a key for the validator to reject,
    // instead of replacing the object's prototype.
    const out: Record<string, unknown> = Object.create(null);
    const given = (data ?? {}) as Record<string, unknown>;
    for (const key of Object.keys(given)) out[key] = given[key];
    for (const [key, property] of properties) {
      const raw = out[key];
      if (typeof raw !== 'string') continue;
      if (takesInt64(property)) out[key] = parseInt64(raw) ?? raw;
      else if ((property as { type?: unknown }).type === 'integer' && DECIMAL.test(raw)) {
        out[key] = Number(raw);
      }
    }
    return out;
  };
}

/** An int64, or a choice of which one is an int64 (`after`: a position or `now`). */
const takesInt64 = (schema: unknown): boolean => {
  const { anyOf } = schema as { anyOf?: unknown };
  return describesInt64(schema) || (Array.isArray(anyOf) && anyOf.some(describesInt64));
};

/** The keywords an id's schema may have for the fast path below to stand in for it. */
const PLAIN_INT64_KEYS = new Set(['type', 'format', 'description']);

/**
 * A path whose parameters are all plain int64 ids (the plants' and the webhooks'): when the
 * int64 parser takes every one, the schema takes them too, so its validator and the copy
 * before it are skipped (a third of what validation cost a GET one, bench/HISTORY.md).
 * Answers undefined for any other schema, and the function undefined for any value it does
 * not take, which then goes the whole way, to the same refusal as before.
 */
function int64Params(schema: unknown): ((data: unknown) => object | undefined) | undefined {
  const s = schema as {
    type?: unknown;
    properties?: Record<string, object>;
    required?: unknown;
    additionalProperties?: unknown;
  };
  const keys = Object.keys(s.properties ?? {});
  const plain = (property: object) =>
    describesInt64(property) && Object.keys(property).every((key) => PLAIN_INT64_KEYS.has(key));
  if (
    s.type !== 'object' ||
    s.additionalProperties !== false ||
    keys.length === 0 ||
    !Object.values(s.properties!).every(plain) ||
    !Array.isArray(s.required) ||
    s.required.length !== keys.length ||
    !keys.every((key) => (s.required as unknown[]).includes(key))
  ) {
    return undefined;
  }
  return (data) => {
    const given = data as Record<string, unknown>;
    if (Object.keys(given).length !== keys.length) return undefined;
    const out: Record<string, bigint> = Object.create(null);
    for (const key of keys) {
      const raw = given[key];
      const id = typeof raw === 'string' ? parseInt64(raw) : undefined;
      if (id === undefined) return undefined;
      out[key] = id;
    }
    return out;
  };
}

/** Path parameters are ids; which error a malformed one is depends on whose id it is. */
const webhookPath = (url: string | undefined) => url?.startsWith('/webhooks') === true;

/**
 * The validator of a route schema, compiled once per schema: the schemas are the operation
 * table's own objects, the same for every app this process builds (each worker, each test),
 * so a second app compiles none of them again.
 */
const validators = new WeakMap<object, ValidateFunction>();
function compiled(schema: object): ValidateFunction {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(forBigIntValidation(schema));
    validators.set(schema, validate);
  }
  return validate;
}

/**
 * Fastify's validator compiler for every route: validates losslessly parsed bodies and
 * coerced path/query values against the same schemas the OpenAPI document publishes,
 * and answers with the catalogue error for the part that failed.
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({
  schema,
  httpPart,
  method,
  url,
}) => {
  const part = (httpPart ?? 'body') as Part;
  const owner: Owner = webhookPath(url) ? 'webhooks' : 'plants';
  const validate = compiled(schema as object);
  const coerce: Coerce =
    part === 'params' || part === 'querystring' ? stringCoercer(schema as object) : (d) => d;
  const errorName =
    part === 'params' && owner === 'webhooks'
      ? 'malformedWebhookId'
      : (errorForPart[part] ?? 'invalidBody');
  const properties = (schema as { properties?: Refusal['properties'] }).properties ?? {};
  const ids = part === 'params' ? int64Params(schema) : undefined;
  return (data: unknown) => {
    const fast = ids?.(data);
    if (fast !== undefined) return { value: fast };
    const value = coerce(data);
    if (validate(value)) return { value };
    const error = validate.errors?.[0];
    const message = validationMessage({ part, owner, method, properties, error, value });
    return { error: new ApiError(errorName, message) };
  };
};
