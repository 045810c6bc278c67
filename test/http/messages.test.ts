import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { body, setup } from '../helpers/setup.js';

// What a refused request is told (issue #16): in the API's words, what to send instead;
// never a regular expression or a validator's phrase. Exact bodies, at the HTTP boundary.

const RANGE = '-9223372036854775808 to 9223372036854775807';
const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };

interface Case {
  method: string;
  url: string;
  json?: string;
  patch?: true;
  error: bigint;
  message: string;
}

const cases: Case[] = [
  // POST /plants bodies
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "   "}',
    error: 40004n,
    message:
      'name must contain a non-blank character: white space, control and format characters alone are not a name.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "\\u200b\\u3164"}',
    error: 40004n,
    message:
      'name must contain a non-blank character: white space, control and format characters alone are not a name.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": ""}',
    error: 40004n,
    message:
      'name must contain a non-blank character: white space, control and format characters alone are not a name.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "a\\u0000b"}',
    error: 40004n,
    message: 'name must not contain U+0000 (the null character).',
  },
  {
    method: 'POST',
    url: '/plants',
    json: `{"name": "${'é'.repeat(101)}"}`,
    error: 40004n,
    message: 'name is 101 characters long; at most 100 are allowed.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": 5}',
    error: 40004n,
    message: 'name must be a string.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"tag": "shade"}',
    error: 40004n,
    message: 'name is required: a plant has a name of 1 to 100 characters.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "Fern", "tag": ""}',
    error: 40004n,
    message: 'tag must not be empty; omit it instead.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "Fern", "tag": null}',
    error: 40004n,
    message: 'tag must be a string; for a plant without a tag, leave tag out.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: `{"name": "Fern", "tag": "${'t'.repeat(51)}"}`,
    error: 40004n,
    message: 'tag is 51 characters long; at most 50 are allowed.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "Fern", "tag": "a\\u0000"}',
    error: 40004n,
    message: 'tag must not contain U+0000 (the null character).',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"id": "12", "name": "Fern"}',
    error: 40004n,
    message: 'id must be a JSON integer, not a string: no quotes around it.',
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"id": 9223372036854775808, "name": "Fern"}',
    error: 40004n,
    message: `id must be an integer from ${RANGE}.`,
  },
  {
    method: 'POST',
    url: '/plants',
    json: '{"name": "Fern", "colour": "green"}',
    error: 40004n,
    message: 'Unknown property "colour": a plant has id, name and tag.',
  },
  ...['[]', '"Fern"', 'null', '42'].map((json) => ({
    method: 'POST',
    url: '/plants',
    json,
    error: 40004n,
    message: 'The request body must be a JSON object, such as {"name": "Fern", "tag": "shade"}.',
  })),
  // PATCH /plants/{id} bodies
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '{"id": 5}',
    patch: true,
    error: 40004n,
    message: 'id cannot be changed; it is in the path.',
  },
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '{"name": null}',
    patch: true,
    error: 40004n,
    message: 'name cannot be removed: every plant has one; send a new name or leave name out.',
  },
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '{"tag": ""}',
    patch: true,
    error: 40004n,
    message: 'tag must not be empty; send null to remove the tag.',
  },
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '{"tag": 7}',
    patch: true,
    error: 40004n,
    message: 'tag must be a string, or null to remove the tag.',
  },
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '{"colour": "green"}',
    patch: true,
    error: 40004n,
    message: 'Unknown property "colour": a patch may change name and tag.',
  },
  {
    method: 'PATCH',
    url: '/plants/5',
    json: '[]',
    patch: true,
    error: 40004n,
    message: 'The request body must be a JSON object, such as {"name": "Fern", "tag": "shade"}.',
  },
  // Ids in the path
  {
    method: 'GET',
    url: '/plants/007',
    error: 40001n,
    message: 'The plant id is written without leading zeros: 7, not 007.',
  },
  {
    method: 'DELETE',
    url: '/plants/-007',
    error: 40001n,
    message: 'The plant id is written without leading zeros: -7, not -007.',
  },
  {
    method: 'GET',
    url: '/plants/+5',
    error: 40001n,
    message: 'The plant id is written without a plus sign: 5, not +5.',
  },
  {
    method: 'GET',
    url: '/plants/-0',
    error: 40001n,
    message: 'The plant id is written without a sign: 0, not -0.',
  },
  {
    method: 'GET',
    url: '/plants/9223372036854775808',
    error: 40001n,
    message: `The plant id must be from ${RANGE}.`,
  },
  {
    method: 'GET',
    url: '/plants/fern',
    error: 40001n,
    message: `The plant id must be a decimal integer from ${RANGE}.`,
  },
  // Query parameters
  {
    method: 'GET',
    url: '/plants?limit=0',
    error: 40002n,
    message: 'limit must be a whole number from 1 to 1000.',
  },
  {
    method: 'GET',
    url: '/plants?limit=ten',
    error: 40002n,
    message: 'limit must be a whole number from 1 to 1000.',
  },
  {
    method: 'GET',
    url: '/plants?after=007',
    error: 40002n,
    message: 'after is written without leading zeros: 7, not 007.',
  },
  {
    method: 'GET',
    url: '/plants?after=x',
    error: 40002n,
    message: `after must be a plant id: a decimal integer from ${RANGE}.`,
  },
  {
    method: 'GET',
    url: '/plants?tag=',
    error: 40002n,
    message: 'tag must not be empty; leave the parameter out to list plants of every tag.',
  },
  {
    method: 'GET',
    url: '/plants?sort=name',
    error: 40002n,
    message: 'Unknown query parameter "sort": this operation takes limit, after and tag.',
  },
  {
    method: 'GET',
    url: '/plants/5?tag=shade',
    error: 40002n,
    message: 'This operation takes no query parameters; "tag" is not one.',
  },
];

describe('a refused input is told what to send, in the API’s words', () => {
  for (const { method, url, json, patch, error, message } of cases) {
    it(`${method} ${url} ${json ?? ''}`.trimEnd(), async (t) => {
      const { call } = await setup(t);
      await call({ method: 'POST', url: '/plants', json: '{"id": 5, "name": "Fern"}' });
      const res = await call({
        method,
        url,
        ...(json !== undefined && { json }),
        ...(patch && { headers: MERGE_PATCH }),
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(body(res), { error, message });
      assert.doesNotMatch(res.body, /pattern|must NOT|\^|\\\\[psu]/);
    });
  }
});

describe('the root and /docs/ send a reader to the reference page', () => {
  it('GET / is 302 Found to /docs, without a body', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'GET', url: '/', token: null });
    assert.equal(res.statusCode, 302);
    assert.equal(res.headers.location, '/docs');
    assert.equal(res.body, '');
  });

  it('GET /docs/ is 308 Permanent Redirect to /docs', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'GET', url: '/docs/', token: null });
    assert.equal(res.statusCode, 308);
    assert.equal(res.headers.location, '/docs');
    const page = await call({ method: 'GET', url: res.headers.location, token: null });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /^<!doctype html>/i);
  });

  it('other methods on / are 405 with Allow: GET', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'POST', url: '/', token: null, json: '{}' });
    assert.equal(res.statusCode, 405);
    assert.equal(res.headers.allow, 'GET');
    assert.deepEqual(body(res), {
      error: 40501n,
      message: 'POST is not supported here; use GET.',
    });
  });
});

interface Documented {
  paths: Record<
    string,
    Record<
      string,
      {
        requestBody?: {
          content: Record<string, { examples?: Record<string, { value: unknown }> }>;
        };
      }
    >
  >;
  components: { schemas: Record<string, { examples?: unknown[] }> };
}

describe('the document’s examples are readable bodies that work as shown', () => {
  it('POST /plants offers {"name": "Fern", "tag": "shade"} first, without an id', async (t) => {
    const { call } = await setup(t);
    const doc = JSON.parse(
      (await call({ method: 'GET', url: '/openapi.json', token: null })).body,
    ) as Documented;
    const examples =
      doc.paths['/plants']!.post!.requestBody!.content['application/json']!.examples!;
    assert.deepEqual(Object.values(examples)[0]!.value, { name: 'Fern', tag: 'shade' });
    assert.deepEqual(doc.components.schemas.NewPlant!.examples, [{ name: 'Fern', tag: 'shade' }]);
  });

  it('every example body is accepted by the operation it is given for', async (t) => {
    const { call } = await setup(t);
    const doc = JSON.parse(
      (await call({ method: 'GET', url: '/openapi.json', token: null })).body,
    ) as Documented;
    const { id } = body<{ id: bigint }>(
      await call({ method: 'POST', url: '/plants', json: '{"name": "Pothos", "tag": "x"}' }),
    );
    let checked = 0;
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
          for (const [name, { value }] of Object.entries(media.examples ?? {})) {
            const res = await call({
              method: method.toUpperCase(),
              url: path.replace('{id}', String(id)),
              json: JSON.stringify(value),
              headers: { 'content-type': type },
            });
            assert.ok(res.statusCode < 300, `${method} ${path} ${type} ${name}: ${res.body}`);
            // The chosen id is taken once created: free it for the other media type.
            if (method === 'post' && res.statusCode === 201) {
              const created = body<{ id: bigint }>(res).id;
              await call({ method: 'DELETE', url: `/plants/${created}` });
            }
            checked++;
          }
        }
      }
    }
    assert.ok(checked >= 6, `only ${checked} examples`);
  });
});
