import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forBigIntValidation } from '../../src/api/int64-schema.js';
import { operations } from '../../src/api/operations.js';
import { createAjv } from '../../src/http/validation.js';

// The server compiles its route validators without checking the schemas against the
// meta-schema first (that check cost every start 55 ms; src/http/validation.ts): it is made
// here instead, on every schema a route hands to the validator compiler (route.ts).

const routeSchemas = operations.flatMap((op) =>
  [
    ['params', op.params],
    ['query', op.query],
    ['body', op.body?.schema],
  ].flatMap(([part, schema]) =>
    schema === undefined ? [] : [{ name: `${op.operationId} ${String(part)}`, schema }],
  ),
);

it('checks every route schema against JSON Schema 2020-12', () => {
  assert.ok(routeSchemas.length >= operations.length, 'every operation has a query schema');
  const ajv = createAjv();
  for (const { name, schema } of routeSchemas) {
    assert.ok(
      ajv.validateSchema(forBigIntValidation(schema as object)),
      `${name}: ${ajv.errorsText(ajv.errors)}`,
    );
  }
});

it('refuses a schema the meta-schema does not allow', () => {
  const ajv = createAjv();
  assert.equal(
    ajv.validateSchema({ type: 'object', properties: { n: { minLength: '3' } } }),
    false,
  );
});
