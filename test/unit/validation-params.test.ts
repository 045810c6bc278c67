import assert from 'node:assert/strict';
import { it } from 'node:test';
import fc from 'fast-check';
import type { FastifySchema } from 'fastify';
import { ApiError } from '../../src/core/errors.js';
import { forBigIntValidation } from '../../src/api/int64-schema.js';
import { PlantParams } from '../../src/api/schemas.js';
import { createAjv, validatorCompiler } from '../../src/http/validation.js';

// Path ids take a fast path (the int64 parser alone) when the schema is nothing but int64
// ids: it must accept exactly what the schema's own validator accepts, with the same value.

const compiled = validatorCompiler({
  schema: PlantParams as FastifySchema,
  httpPart: 'params',
  method: 'GET',
  url: '/plants/:id',
}) as (data: unknown) => { value?: unknown; error?: unknown };
const reference = createAjv().compile(forBigIntValidation(PlantParams));

/** What the schema says of a path value: the bigint it stands for, or undefined if refused. */
function byTheSchema(raw: string): bigint | undefined {
  if (!/^-?\d+$/.test(raw) || (raw.length > 1 && /^-?0/.test(raw))) return undefined;
  const value = { id: BigInt(raw) };
  return reference(value) ? value.id : undefined;
}

const idText = fc.oneof(
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
  fc.constantFrom('', '-0', '01', '+1', ' 1', '1 ', '1e3', '0x10', '٣', '9223372036854775808'),
  fc.string(),
);

it('accepts a path id exactly when the schema does, as the same bigint', () => {
  fc.assert(
    fc.property(idText, (raw) => {
      const result = compiled({ id: raw });
      const expected = byTheSchema(raw);
      if (expected === undefined) {
        assert.ok(result.error instanceof ApiError, `refuses ${JSON.stringify(raw)}`);
      } else {
        assert.deepEqual({ ...(result.value as object) }, { id: expected });
      }
    }),
    { numRuns: 2000 },
  );
});

it('refuses a path with more than the ids the schema names', () => {
  const result = compiled({ id: '1', other: '2' });
  assert.ok(result.error instanceof ApiError);
});
