import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { test } from 'node:test';
import { composeApp } from '../../src/server/compose.js';
import { body, setup } from '../helpers/setup.js';

// Routing, operational endpoints, request ids and errors of the HTTP parser
// (docs/decisions.md §2, §3, §7).

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('an unknown route is 404 with error 40402, with or without a token', async (t) => {
  const { call } = await setup(t);
  for (const url of ['/nowhere', '/plant', '/plants/1/leaves', '/v1/plants', '//plants', '/x/']) {
    for (const token of [undefined, null]) {
      const res = await call({ method: 'GET', url, token });
      assert.equal(res.statusCode, 404, url);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.headers.allow, undefined);
      const answer = body<{ error: bigint; message: string }>(res);
      assert.equal(answer.error, 40402n, url);
      assert.equal(answer.message, `No resource at ${url}.`);
    }
  }
});

test('an unknown method on a route is 405 with Allow, even with an unknown verb', async (t) => {
  const { call } = await setup(t);
  const cases = [
    ['PUT', '/plants', 'GET, POST'],
    ['DELETE', '/plants', 'GET, POST'],
    ['PATCH', '/plants', 'GET, POST'],
    ['OPTIONS', '/plants', 'GET, POST'],
    ['PUT', '/plants/1', 'GET, PATCH, DELETE'],
    ['POST', '/plants/1', 'GET, PATCH, DELETE'],
    ['OPTIONS', '/plants/1', 'GET, PATCH, DELETE'],
    ['POST', '/healthz', 'GET'],
    ['DELETE', '/openapi.json', 'GET'],
  ] as const;
  for (const [method, url, allow] of cases) {
    for (const token of [undefined, null]) {
      const res = await call({ method, url, token });
      assert.equal(res.statusCode, 405, `${method} ${url}`);
      assert.equal(res.headers.allow, allow, `${method} ${url}`);
      assert.deepEqual(body(res), {
        error: 40501n,
        message: `${method} is not supported here; use ${allow}.`,
      });
    }
  }
});

test('HEAD is not an operation: 405 with Allow and no body', async (t) => {
  const { app } = await setup(t);
  for (const [url, allow] of [
    ['/plants', 'GET, POST'],
    ['/plants/1', 'GET, PATCH, DELETE'],
    ['/healthz', 'GET'],
  ] as const) {
    const res = await app.inject({ method: 'HEAD', url });
    assert.equal(res.statusCode, 405, url);
    assert.equal(res.headers.allow, allow, url);
    assert.equal(res.body, '');
  }
});

test('routing comes first whatever the body: 404 and 405 before it is read', async (t) => {
  const { call } = await setup(t);
  const cases = [
    ['POST', '/nowhere', 'application/json', '{bad', 404],
    ['PUT', '/plants/1', 'application/json', `{"name":"${'a'.repeat(70_000)}"}`, 405],
    ['OPTIONS', '/plants/1', '', '{"name":"x"}', 405],
    ['DELETE', '/plants', 'text/plain', 'x', 405],
  ] as const;
  for (const [method, url, type, payload, status] of cases) {
    const res = await call({ method, url, headers: { 'content-type': type }, payload });
    assert.equal(res.statusCode, status, `${method} ${url} ${type}`);
  }
});

test('/healthz and /readyz answer 200 {"status":"ok"}', async (t) => {
  const { call } = await setup(t);
  for (const url of ['/healthz', '/readyz']) {
    const res = await call({ method: 'GET', url, token: null });
    assert.equal(res.statusCode, 200, url);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.body, '{"status":"ok"}\n');
  }
});

test('/readyz is 503 50301 when the database does not answer; /healthz stays 200', async (t) => {
  const { store } = await setup(t);
  const failing = {
    ...store,
    ping: async () => {
      throw new Error('connection refused at 10.0.0.7:5432');
    },
  };
  const app = composeApp({ store: failing });
  t.after(() => app.close());
  const res = await app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 503);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.deepEqual(body(res), { error: 50301n, message: 'The database is unavailable.' });
  assert.doesNotMatch(res.body, /refused|10\.0\.0\.7/);
  const health = await app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(health.statusCode, 200);
});

test('/readyz is 503 once the store is closed', async (t) => {
  const { call, store } = await setup(t);
  await store.close();
  const res = await call({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 503);
  assert.equal(body<{ error: bigint }>(res).error, 50301n);
});

test('/openapi.json is the OpenAPI 3.1.0 document of version 1.0.0', async (t) => {
  const { call } = await setup(t);
  const res = await call({ method: 'GET', url: '/openapi.json', token: null });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const doc = JSON.parse(res.body) as {
    openapi: string;
    info: { version: string; license: { name: string } };
    paths: Record<string, unknown>;
  };
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, '1.0.0');
  assert.equal(doc.info.license.name, 'MIT');
  assert.ok('/plants/{id}' in doc.paths);
});

test('/docs is an HTML page that loads only local assets', async (t) => {
  const { call } = await setup(t);
  const res = await call({ method: 'GET', url: '/docs', token: null });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.match(res.body, /^<!doctype html>/i);
  assert.doesNotMatch(res.body, /https?:\/\//i);
  assert.doesNotMatch(res.body, /(src|href)="\/\//);
  assert.match(res.body, /href="\/docs\/swagger-ui\.css"/);
  assert.match(res.body, /src="\/docs\/swagger-ui-bundle\.js"/);
  assert.match(res.body, /\/openapi\.json/);
});

test('the assets of /docs are served with their content types', async (t) => {
  const { call } = await setup(t);
  const css = await call({ method: 'GET', url: '/docs/swagger-ui.css', token: null });
  assert.equal(css.statusCode, 200);
  assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
  assert.ok(css.body.length > 1000);
  assert.match(css.body, /\.swagger-ui/);
  const js = await call({ method: 'GET', url: '/docs/swagger-ui-bundle.js', token: null });
  assert.equal(js.statusCode, 200);
  assert.equal(js.headers['content-type'], 'text/javascript; charset=utf-8');
  assert.match(js.body, /SwaggerUIBundle/);
});

test('an unknown asset under /docs is 404 40402, and no file outside is reachable', async (t) => {
  const { call } = await setup(t);
  for (const url of [
    '/docs/x',
    '/docs/index.html',
    '/docs/package.json',
    '/docs/..%2Fpackage.json',
    '/docs/constructor',
    '/docs/__proto__',
  ]) {
    const res = await call({ method: 'GET', url, token: null });
    assert.equal(res.statusCode, 404, url);
    assert.equal(body<{ error: bigint }>(res).error, 40402n, url);
  }
});

test('a sane X-Request-Id from the client is echoed', async (t) => {
  const { call } = await setup(t);
  for (const id of ['abc-123', 'x', 'A'.repeat(128), '!~req:42/@x']) {
    for (const url of ['/healthz', '/plants', '/nowhere']) {
      const res = await call({ method: 'GET', url, headers: { 'x-request-id': id } });
      assert.equal(res.headers['x-request-id'], id, `${url} ${id}`);
    }
  }
});

test('without a usable X-Request-Id each answer gets a fresh UUID', async (t) => {
  const { call } = await setup(t);
  const seen = new Set<string>();
  for (const headers of [
    {},
    { 'x-request-id': 'A'.repeat(129) },
    { 'x-request-id': 'has space' },
    { 'x-request-id': 'tab\there' },
    { 'x-request-id': '' },
  ]) {
    for (const token of [undefined, null]) {
      const res = await call({ method: 'GET', url: '/plants', headers, token });
      const id = String(res.headers['x-request-id']);
      assert.match(id, UUID, JSON.stringify(headers));
      seen.add(id);
    }
  }
  assert.equal(seen.size, 10);
});

test('a URL with a bad percent-encoding is 400 with the Error body and a request id', async (t) => {
  const { call } = await setup(t);
  for (const url of ['/plants/%zz', '/plants/%', '/plants?limit=%zz']) {
    const res = await call({ method: 'GET', url, headers: { 'x-request-id': 'bad-url' } });
    assert.equal(res.statusCode, 400, url);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(body<{ error: bigint }>(res).error / 100n, 400n, url);
    assert.equal(res.headers['x-request-id'], 'bad-url', url);
  }
  const path = await call({ method: 'GET', url: '/plants/%zz' });
  assert.deepEqual(body(path), { error: 40006n, message: 'The HTTP request is malformed.' });
});

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/** Sends raw bytes to a listening server and reads the answer until it closes. */
async function raw(port: number, request: string): Promise<RawAnswer> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.end(request);
  });
  const split = text.indexOf('\r\n\r\n');
  assert.ok(split > 0, `an HTTP answer, got ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
  const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine!);
  assert.ok(status, statusLine);
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(status[1]), headers, body: text.slice(split + 4) };
}

async function listening(t: Parameters<typeof setup>[0]): Promise<number> {
  const { app } = await setup(t);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as AddressInfo).port;
}

function assertRawError(answer: RawAnswer, status: number, error: number): void {
  assert.equal(answer.status, status);
  assert.equal(answer.headers.get('content-type'), 'application/json; charset=utf-8');
  assert.equal(Number(answer.headers.get('content-length')), Buffer.byteLength(answer.body));
  // The document promises X-Request-Id on every error; no request was parsed, so it is fresh.
  assert.match(answer.headers.get('x-request-id') ?? '', UUID);
  assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(answer.headers.get('cache-control'), 'no-store');
  const parsed = JSON.parse(answer.body) as { error: number; message: string };
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'message']);
  assert.equal(parsed.error, error);
  assert.equal(typeof parsed.message, 'string');
  assert.ok(parsed.message.length > 0);
}

test('a header section over 16 KiB is 431 with the Error body 43101', async (t) => {
  const port = await listening(t);
  const answer = await raw(
    port,
    `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
  );
  assertRawError(answer, 431, 43101);
  assert.deepEqual(JSON.parse(answer.body), {
    error: 43101,
    message: 'The request header fields are too large.',
  });
});

test('a garbage request line is 400 with the Error body 40006', async (t) => {
  const port = await listening(t);
  for (const request of [
    'GARBAGE\r\n\r\n',
    'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nBad Header Name: x\r\n\r\n',
  ]) {
    const answer = await raw(port, request);
    assertRawError(answer, 400, 40006);
    assert.deepEqual(JSON.parse(answer.body), {
      error: 40006,
      message: 'The HTTP request is malformed.',
    });
  }
});

test('a well-formed raw request on the same server is answered normally', async (t) => {
  const port = await listening(t);
  const answer = await raw(
    port,
    'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: raw-1\r\nConnection: close\r\n\r\n',
  );
  assert.equal(answer.status, 200);
  assert.equal(answer.headers.get('x-request-id'), 'raw-1');
  assert.equal(answer.body, '{"status":"ok"}\n');
});

test('an Expect other than 100-continue is ignored (RFC 9110 §10.1.1), not a bare 417', async (t) => {
  const port = await listening(t);
  const answer = await raw(
    port,
    'GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: foo\r\nConnection: close\r\n\r\n',
  );
  assert.equal(answer.status, 200);
  assert.equal(answer.body, '{"status":"ok"}\n');
});
