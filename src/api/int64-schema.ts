import type { Ajv2020 } from 'ajv/dist/2020.js';
import { INT64_RANGE, isInt64 } from '../core/int64.js';

/** The keyword that stands for `{type: integer, format: int64}` in validators. */
export const INT64_KEYWORD = 'x-int64';

function isInt64Schema(node: Record<string, unknown>): boolean {
  return node.format === 'int64' && node.type === 'integer';
}

/**
 * Rewrites a published schema for validation of losslessly parsed data, where int64
 * values are bigints that `type: integer` would reject: each `{type: integer, format:
 * int64}` becomes `{x-int64: true}`. Everything else is kept as it is, so the
 * published document stays the single source.
 */
export function forBigIntValidation<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(forBigIntValidation) as T;
  if (schema === null || typeof schema !== 'object') return schema;
  const node = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = forBigIntValidation(value);
  if (isInt64Schema(node)) {
    delete out.type;
    delete out.format;
    out[INT64_KEYWORD] = true;
  }
  return out as T;
}

/** Teaches an Ajv instance the keyword that forBigIntValidation emits. */
export function addInt64Keyword(ajv: Ajv2020): void {
  ajv.addKeyword({
    keyword: INT64_KEYWORD,
    schemaType: 'boolean',
    error: { message: `must be an integer from ${INT64_RANGE}` },
    validate: (_enabled: boolean, data: unknown) => typeof data === 'bigint' && isInt64(data),
  });
}

/** True when a published schema describes an int64. */
export function describesInt64(schema: unknown): boolean {
  return (
    schema !== null &&
    typeof schema === 'object' &&
    isInt64Schema(schema as Record<string, unknown>)
  );
}
