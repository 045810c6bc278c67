import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { composeApp } from '../../src/server/compose.js';
import type { CorsOrigins } from '../../src/api/cors-origins.js';
import { TokenService } from '../../src/service/token-service.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { OpenApiValidator } from '../helpers/openapi-validator.js';
import { body, makeTempDir, setup } from '../helpers/setup.js';

// CORS: off by default; with --cors-origins, preflights answered before authentication and
// every answer to an allowed origin readable by the page, errors included (inject; the
// browser test drives a real browser against a real process).

const APP = 'https://app.example';
const OTHER = 'https://evil.example';
const EXPOSED =
  'Location, ETag, Link, Retry-After, X-Request-Id, WWW-Authenticate, Allow, RateLimit, ' +
  'RateLimit-Policy, Idempotent-Replayed';
const ALLOWED_HEADERS =
  'Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, X-Request-Id, Last-Event-ID';

type Answer = { error: bigint; message: string };

/** An app with CORS for `origins`; `call` checks each answer against the served document. */
async function corsApp(t: TestContext, origins: CorsOrigins) {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'cors.db') });
  const app = composeApp({ store, corsOrigins: origins });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  const token = (
    await new TokenService(store.tokens).create({
      name: 'cors',
      scopes: ['plants:read', 'plants:write'],
      expiresInMs: null,
    })
  ).token;
  const served = await app.inject({ method: 'GET', url: '/openapi.json' });
  const validator = new OpenApiValidator(JSON.parse(served.body));
  const call = async (options: InjectOptions & { method: string; url: string }) => {
    const res = await app.inject(options);
    validator.check(options.method, options.url, res);
    return res;
  };
  return { call, token };
}

const preflight = (url: string, origin: string, method = 'GET') => ({
  method: 'OPTIONS',
  url,
  headers: {
    origin,
    'access-control-request-method': method,
    'access-control-request-headers': 'authorization,content-type',
  },
});

const corsHeaders = (res: LightMyRequestResponse) =>
  Object.keys(res.headers).filter((name) => name.startsWith('access-control-'));

test('CORS is off by default: no CORS headers, and a preflight is 405 with Allow', async (t) => {
  const { call } = await setup(t);
  const read = await call({ method: 'GET', url: '/plants', headers: { origin: APP } });
  assert.equal(read.statusCode, 200);
  assert.deepEqual(corsHeaders(read), []);
  assert.equal(read.headers.vary, undefined);
  const res = await call({ ...preflight('/plants', APP), token: null });
  assert.equal(res.statusCode, 405);
  assert.equal(res.headers.allow, 'GET, POST');
  assert.deepEqual(corsHeaders(res), []);
  assert.deepEqual(body(res), {
    error: 40501n,
    message: 'OPTIONS is not supported here; use GET, POST.',
  });
});

test('a preflight from an allowed origin is 204 with the methods of its path', async (t) => {
  const { call } = await corsApp(t, [APP, 'http://localhost:3000']);
  for (const [url, methods, asked] of [
    ['/plants', 'GET, POST', 'POST'],
    ['/plants/42?x=1', 'GET, PATCH, DELETE', 'PATCH'],
    ['/plants/not-an-id', 'GET, PATCH, DELETE', 'DELETE'],
    ['/healthz', 'GET', 'GET'],
  ] as const) {
    const res = await call(preflight(url, APP, asked));
    assert.equal(res.statusCode, 204, url);
    assert.equal(res.body, '');
    assert.equal(res.headers['access-control-allow-origin'], APP);
    assert.equal(res.headers['access-control-allow-methods'], methods, url);
    assert.equal(res.headers['access-control-allow-headers'], ALLOWED_HEADERS);
    assert.equal(res.headers['access-control-max-age'], '600');
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
    assert.equal(res.headers.vary, 'Origin');
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.ok(res.headers['x-request-id']);
  }
  const second = await call(preflight('/plants', 'http://localhost:3000', 'POST'));
  assert.equal(second.headers['access-control-allow-origin'], 'http://localhost:3000');
});

test('a preflight from another origin is 403 40302, without CORS headers', async (t) => {
  const { call } = await corsApp(t, [APP]);
  // Origins are compared exactly, as browsers serialise them.
  for (const origin of [OTHER, 'http://app.example', 'https://app.example:8443', 'null']) {
    const res = await call(preflight('/plants/1', origin, 'DELETE'));
    assert.equal(res.statusCode, 403, origin);
    assert.deepEqual(corsHeaders(res), [], origin);
    assert.equal(res.headers.vary, 'Origin');
    assert.deepEqual(body(res), {
      error: 40302n,
      message: 'Web pages from this origin may not call the API (CORS).',
    });
  }
});

test('routing comes first: a preflight to an unknown path is 404, still readable', async (t) => {
  const { call } = await corsApp(t, [APP]);
  const res = await call(preflight('/nowhere', APP));
  assert.equal(res.statusCode, 404);
  assert.equal(body<Answer>(res).error, 40402n);
  assert.equal(res.headers['access-control-allow-origin'], APP);
  const other = await call(preflight('/nowhere', OTHER));
  assert.equal(other.statusCode, 404);
  assert.deepEqual(corsHeaders(other), []);
});

test('OPTIONS that is not a preflight stays 405 with Allow when CORS is on', async (t) => {
  const { call } = await corsApp(t, [APP]);
  for (const headers of [{}, { origin: APP }, { 'access-control-request-method': 'GET' }]) {
    const res = await call({ method: 'OPTIONS', url: '/plants', headers });
    assert.equal(res.statusCode, 405, JSON.stringify(headers));
    assert.equal(res.headers.allow, 'GET, POST');
    assert.equal(body<Answer>(res).error, 40501n);
  }
});

test('answers to an allowed origin, errors included, carry Allow-Origin and Expose-Headers', async (t) => {
  const { call, token } = await corsApp(t, [APP]);
  const auth = { authorization: `Bearer ${token}`, origin: APP };
  const cases: [InjectOptions & { method: string; url: string }, number][] = [
    [
      {
        method: 'POST',
        url: '/plants',
        headers: { ...auth, 'content-type': 'application/json' },
        payload: '{"id":1,"name":"Fern"}',
      },
      201,
    ],
    [{ method: 'GET', url: '/plants/1', headers: auth }, 200],
    [{ method: 'GET', url: '/plants', headers: { origin: APP } }, 401],
    [{ method: 'GET', url: '/plants', headers: { ...auth, authorization: 'Bearer nope' } }, 401],
    [{ method: 'GET', url: '/plants/2', headers: auth }, 404],
    [{ method: 'GET', url: '/nowhere', headers: auth }, 404],
    [{ method: 'PUT', url: '/plants/1', headers: auth }, 405],
    [{ method: 'GET', url: '/plants/abc', headers: auth }, 400],
    // A URL Fastify refuses before any hook runs (its frameworkErrors path).
    [{ method: 'GET', url: '/plants/%zz', headers: auth }, 400],
    [{ method: 'GET', url: '/healthz', headers: { origin: APP } }, 200],
  ];
  for (const [request, status] of cases) {
    const res = await call(request);
    const what = `${request.method} ${request.url}`;
    assert.equal(res.statusCode, status, what);
    assert.equal(res.headers['access-control-allow-origin'], APP, what);
    assert.equal(res.headers['access-control-expose-headers'], EXPOSED, what);
    assert.equal(res.headers.vary, 'Origin', what);
    assert.equal(res.headers['access-control-allow-methods'], undefined, what);
  }
});

test('requests from other origins are served as usual, without CORS headers', async (t) => {
  const { call, token } = await corsApp(t, [APP]);
  const res = await call({
    method: 'GET',
    url: '/plants',
    headers: { authorization: `Bearer ${token}`, origin: OTHER },
  });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(corsHeaders(res), []);
  assert.equal(res.headers.vary, 'Origin');
  const none = await call({ method: 'GET', url: '/healthz' });
  assert.deepEqual(corsHeaders(none), []);
});

test('with *, every origin may call, with Allow-Origin: * and never credentials', async (t) => {
  const { call, token } = await corsApp(t, '*');
  for (const origin of [APP, OTHER, 'null']) {
    const pre = await call(preflight('/plants', origin, 'POST'));
    assert.equal(pre.statusCode, 204, origin);
    assert.equal(pre.headers['access-control-allow-origin'], '*');
    assert.equal(pre.headers['access-control-allow-credentials'], undefined);
    const res = await call({
      method: 'GET',
      url: '/plants',
      headers: { authorization: `Bearer ${token}`, origin },
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.equal(res.headers['access-control-expose-headers'], EXPOSED);
  }
});

test('an empty origin list leaves CORS off', async (t) => {
  const { call } = await corsApp(t, []);
  const res = await call(preflight('/plants', APP));
  assert.equal(res.statusCode, 405);
  assert.deepEqual(corsHeaders(res), []);
  assert.equal(res.headers.vary, undefined);
});
