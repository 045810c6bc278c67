import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Call, setup } from '../helpers/setup.js';

// Every answer: nosniff, no-store (except the static /docs assets), never X-Powered-By.

test('every kind of answer carries nosniff and no-store, and no X-Powered-By', async (t) => {
  const { call, newToken } = await setup(t);
  const readOnly = await newToken(['plants:read']);
  const cases: [string, Call, number][] = [
    ['create', { method: 'POST', url: '/plants', json: '{"id":7,"name":"Fern"}' }, 201],
    ['read', { method: 'GET', url: '/plants/7' }, 200],
    ['list', { method: 'GET', url: '/plants' }, 200],
    ['update', { method: 'PATCH', url: '/plants/7', json: '{"tag":"green"}' }, 200],
    ['delete', { method: 'DELETE', url: '/plants/7' }, 204],
    ['not found', { method: 'GET', url: '/plants/7' }, 404],
    ['no token', { method: 'GET', url: '/plants', token: null }, 401],
    ['wrong scope', { method: 'DELETE', url: '/plants/7', token: readOnly }, 403],
    ['bad id', { method: 'GET', url: '/plants/x' }, 400],
    ['bad JSON', { method: 'POST', url: '/plants', json: '{' }, 400],
    ['unknown route', { method: 'GET', url: '/nowhere' }, 404],
    ['method not allowed', { method: 'PUT', url: '/plants/7' }, 405],
    ['undecodable URL (a Fastify framework error)', { method: 'GET', url: '/plants/%zz' }, 400],
    ['health', { method: 'GET', url: '/healthz', token: null }, 200],
    ['OpenAPI document', { method: 'GET', url: '/openapi.json', token: null }, 200],
  ];
  for (const [what, request, status] of cases) {
    const res = await call(request);
    assert.equal(res.statusCode, status, `${what}: ${res.body}`);
    assert.equal(res.headers['x-content-type-options'], 'nosniff', what);
    assert.equal(res.headers['cache-control'], 'no-store', what);
    assert.equal(res.headers['x-powered-by'], undefined, what);
  }
});

test('the static /docs assets may be cached, and are still nosniff', async (t) => {
  const { call } = await setup(t);
  const res = await call({ method: 'GET', url: '/docs/swagger-ui.css', token: null });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.equal(res.headers['cache-control'], 'public, max-age=3600');
});
