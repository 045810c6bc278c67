import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { errorCatalogue, statusOf } from '../../src/core/errors.js';
import { setup } from '../helpers/setup.js';

// The served OpenAPI document: valid 3.1, what docs/decisions.md §8 says, and committed as is.

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Record<string, unknown>;
}

interface Operation {
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  responses: Record<string, { content?: Record<string, unknown> }>;
}

interface Document {
  openapi: string;
  info: { version: string; license?: { name: string; identifier?: string } };
  servers?: { url: string }[];
  security?: Record<string, string[]>[];
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, Record<string, unknown>> };
  'x-error-catalogue': { name: string; code: number; status: number; message: string }[];
}

async function served(t: Parameters<typeof setup>[0]): Promise<{ text: string; doc: Document }> {
  const { app } = await setup(t);
  const res = await app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  return { text: res.body, doc: JSON.parse(res.body) as Document };
}

test('the served document is valid OpenAPI 3.1 for a schema validator', async (t) => {
  const { doc } = await served(t);
  const validator = new Validator();
  const result = await validator.validate(doc as unknown as Record<string, unknown>);
  assert.ok(result.valid, JSON.stringify(result.errors, null, 2));
  assert.equal(validator.version, '3.1');
});

test('the document says openapi 3.1.0, version 1.0.0 and license MIT', async (t) => {
  const { doc } = await served(t);
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, '1.0.0');
  assert.equal(doc.info.license?.name, 'MIT');
  if (doc.info.license?.identifier !== undefined) assert.equal(doc.info.license.identifier, 'MIT');
});

test('bearerAuth is an http bearer scheme and the global security', async (t) => {
  const { doc } = await served(t);
  const scheme = doc.components.securitySchemes.bearerAuth;
  assert.equal(scheme?.type, 'http');
  assert.equal(scheme?.scheme, 'bearer');
  assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
});

test('every plant operation requires bearerAuth; CORS preflights need none', async (t) => {
  const { doc } = await served(t);
  const plantPaths = Object.keys(doc.paths).filter((path) => path.startsWith('/plants'));
  assert.deepEqual(plantPaths.sort(), ['/plants', '/plants/{id}']);
  for (const path of plantPaths) {
    for (const [method, operation] of Object.entries(doc.paths[path]!)) {
      const schemes = (operation.security ?? doc.security ?? []).flatMap((s) => Object.keys(s));
      // Browsers send a preflight without credentials (Fetch standard).
      assert.deepEqual(schemes, method === 'options' ? [] : ['bearerAuth'], `${method} ${path}`);
    }
  }
});

test('paths carry no version segment', async (t) => {
  const { doc } = await served(t);
  for (const path of Object.keys(doc.paths)) {
    assert.ok(path.startsWith('/'), path);
    for (const segment of path.split('/')) {
      assert.doesNotMatch(segment, /^v\d+(\.\d+)*$/i, path);
    }
  }
  for (const server of doc.servers ?? []) assert.doesNotMatch(server.url, /\/v\d+/i);
});

// redocly.yaml turns these two rules off for the redirects alone; they hold everywhere else.
const REDIRECTS = ['/', '/docs/'];

test('every operation but the redirects to /docs has a 2xx answer', async (t) => {
  const { doc } = await served(t);
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (REDIRECTS.includes(path) && method === 'get') continue;
      const statuses = Object.keys(operation.responses);
      assert.ok(
        statuses.some((status) => /^2\d\d$/.test(status)),
        `${method} ${path}`,
      );
    }
  }
  for (const path of REDIRECTS) {
    assert.deepEqual(
      Object.keys(doc.paths[path]!.get!.responses).filter((status) => status < '400'),
      [path === '/' ? '302' : '308'],
    );
  }
});

test('no path but /docs/ ends with a slash', async (t) => {
  const { doc } = await served(t);
  const slashed = Object.keys(doc.paths).filter((path) => path !== '/' && path.endsWith('/'));
  assert.deepEqual(slashed, ['/docs/']);
});

test('DELETE /plants/{id} answers 204 without a body and 400, with an int64 path id', async (t) => {
  const { doc } = await served(t);
  const operation = doc.paths['/plants/{id}']?.delete;
  assert.ok(operation !== undefined, 'DELETE /plants/{id} is not documented');
  assert.ok('204' in operation.responses);
  assert.equal(operation.responses['204']?.content, undefined);
  assert.ok('400' in operation.responses);
  assert.ok(operation.responses['400']?.content?.['application/json'] !== undefined);
  const id = operation.parameters?.find((p) => p.name === 'id');
  assert.equal(id?.in, 'path');
  assert.equal(id?.required, true);
  assert.equal(id?.schema?.type, 'integer');
  assert.equal(id?.schema?.format, 'int64');
});

test('x-error-catalogue lists every code of the catalogue, with its status', async (t) => {
  const { doc } = await served(t);
  const published = doc['x-error-catalogue'];
  assert.ok(Array.isArray(published));
  for (const [name, kind] of Object.entries(errorCatalogue)) {
    const entry = published.find((e) => e.code === kind.code);
    assert.ok(entry !== undefined, `${name} (${kind.code}) is not in x-error-catalogue`);
    assert.equal(entry.name, name);
    assert.equal(entry.status, statusOf(kind));
    assert.equal(entry.message, kind.message);
  }
  assert.equal(published.length, Object.keys(errorCatalogue).length);
});

test('the committed openapi.json is the served document', async (t) => {
  const { doc } = await served(t);
  const expected = `${JSON.stringify(doc, null, 2)}\n`;
  let committed: string;
  try {
    committed = readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8');
  } catch {
    assert.fail('openapi.json is missing at the repository root; run `npm run openapi`');
  }
  if (committed === expected) return;
  const got = committed.split('\n');
  const line = expected.split('\n').findIndex((text, i) => text !== got[i]);
  assert.fail(
    `openapi.json differs from the document the server serves (first at line ${line + 1}); ` +
      'run `npm run openapi` and commit openapi.json',
  );
});
