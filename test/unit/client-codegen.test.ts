import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { buildOpenApiDocument } from '../../src/api/openapi.js';
import { generateClientSources, int64Shapes } from '../../scripts/client-codegen.js';

const ROOT = new URL('../../', import.meta.url);

test('the client generated from the served document is the one committed', async () => {
  const generated = await generateClientSources(buildOpenApiDocument());
  assert.deepEqual(Object.keys(generated).sort(), [
    'packages/client/src/int64-shapes.ts',
    'packages/client/src/schema.d.ts',
  ]);
  for (const [path, text] of Object.entries(generated)) {
    const committed = readFileSync(new URL(path, ROOT), 'utf8');
    assert.ok(
      committed === text,
      `${path} differs from what the served document generates; run \`npm run client\` and commit it`,
    );
  }
});

/** How many schemas of `format: int64` a document holds. */
function countInt64(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((sum: number, item) => sum + countInt64(item), 0);
  if (node === null || typeof node !== 'object') return 0;
  const own = (node as Record<string, unknown>).format === 'int64' ? 1 : 0;
  return Object.values(node).reduce((sum: number, item) => sum + countInt64(item), own);
}

test('every int64 of the document is a bigint in the generated types', async () => {
  const document = buildOpenApiDocument();
  const { 'packages/client/src/schema.d.ts': schema } = await generateClientSources(document);
  // A bigint alone, or first of a choice (`bigint | null`, the feed's `after`: `bigint | 'now'`).
  const bigints = schema!.match(/^\s*[\w']+\??: bigint(?: \| [^;]+)?;$/gm) ?? [];
  // The ids of Plant and NewPlant, the three {id} path parameters, the list's `after`.
  assert.ok(countInt64(document) >= 6);
  assert.equal(bigints.length, countInt64(document));

  const components = document.components as { schemas: object };
  const nullable = await generateClientSources({
    ...document,
    components: {
      ...components,
      schemas: { ...components.schemas, Maybe: { type: ['integer', 'null'], format: 'int64' } },
    },
  });
  assert.match(nullable['packages/client/src/schema.d.ts']!, /Maybe: bigint \| null;/);
});

test('the shapes find int64 values through refs, arrays, maps and compositions', () => {
  const schema = (body: unknown) => ({
    paths: {
      '/x': {
        get: { responses: { '200': { content: { 'application/json': { schema: body } } } } },
      },
    },
    components: {
      schemas: {
        Id: { type: 'integer', format: 'int64' },
        Node: {
          type: 'object',
          properties: {
            id: { $ref: '#/components/schemas/Id' },
            next: { $ref: '#/components/schemas/Node' },
          },
        },
      },
    },
  });
  const shapeOf = (body: unknown) => int64Shapes(schema(body))['GET /x']?.['200'];
  assert.deepEqual(shapeOf({ type: 'array', items: { $ref: '#/components/schemas/Id' } }), {
    items: { int64: true },
  });
  assert.deepEqual(shapeOf({ type: ['integer', 'null'], format: 'int64' }), { int64: true });
  assert.deepEqual(
    shapeOf({ type: 'object', additionalProperties: { type: 'integer', format: 'int64' } }),
    { additional: { int64: true } },
  );
  assert.deepEqual(
    shapeOf({
      oneOf: [
        { type: 'object', properties: { a: { type: 'integer', format: 'int64' } } },
        {
          type: 'object',
          properties: { b: { type: 'integer', format: 'int64' }, c: { type: 'integer' } },
        },
      ],
    }),
    { properties: { a: { int64: true }, b: { int64: true } } },
  );
  // A schema that refers to itself is read one level deep, and the walk ends.
  assert.deepEqual(shapeOf({ $ref: '#/components/schemas/Node' }), {
    properties: { id: { int64: true } },
  });
  assert.equal(shapeOf({ type: 'integer', format: 'int32' }), undefined);
});
