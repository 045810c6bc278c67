import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { body, setup } from '../helpers/setup.js';

// Requests at the odd edges of HTTP and JSON: a stray Content-Type, a __proto__ parameter,
// -0 and broken Unicode in a body, no Host, CONNECT. Each is refused with an Error body, or
// served as if the oddity were not there.

type Answer = { error: bigint; message: string };

/** Sends raw bytes to a listening app and resolves with everything it answers. */
function raw(port: number, request: string, waitMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    setTimeout(() => {
      socket.destroy();
      resolve(answer);
    }, waitMs).unref();
  });
}

function parseRaw(answer: string): { status: number; headers: string; body: Answer } {
  const [head = '', text = ''] = answer.split('\r\n\r\n');
  return {
    status: Number(head.split(' ')[1]),
    headers: head.toLowerCase(),
    body: body<Answer>({ body: text }),
  };
}

test('a stray Content-Type on a request with no body does not get in the way', async (t) => {
  const { call } = await setup(t);
  for (const [id, type] of [
    [1, 'application/json'],
    [2, 'text/plain'],
  ] as const) {
    await call({ method: 'POST', url: '/plants', json: `{"id":${id},"name":"x"}` });
    const headers = { 'content-type': type };
    assert.equal((await call({ method: 'GET', url: `/plants/${id}`, headers })).statusCode, 200);
    assert.equal((await call({ method: 'DELETE', url: `/plants/${id}`, headers })).statusCode, 204);
  }
});

test('a __proto__ query parameter is an unknown parameter like any other', async (t) => {
  const { call } = await setup(t);
  const res = await call({ method: 'GET', url: '/plants?__proto__=x' });
  assert.equal(res.statusCode, 400);
  assert.deepEqual(body(res), {
    error: 40002n,
    message: 'Unknown query parameter "__proto__": this operation takes limit, after and tag.',
  });
});

test('-0 as a JSON id, invalid UTF-8 and unpaired surrogates are refused', async (t) => {
  const { call } = await setup(t);
  const minusZero = await call({ method: 'POST', url: '/plants', json: '{"id":-0,"name":"x"}' });
  assert.equal(body<Answer>(minusZero).error, 40004n);
  const surrogate = await call({ method: 'POST', url: '/plants', json: '{"name":"\\ud800"}' });
  assert.equal(body<Answer>(surrogate).error, 40003n);
  const bytes = Buffer.concat([
    Buffer.from('{"name":"'),
    Buffer.from([0xff, 0xfe]),
    Buffer.from('"}'),
  ]);
  const latin = await call({
    method: 'POST',
    url: '/plants',
    headers: { 'content-type': 'application/json' },
    payload: bytes,
  });
  assert.equal(body<Answer>(latin).error, 40003n);
  const list = await call({ method: 'GET', url: '/plants' });
  assert.equal(list.body, '[]\n');
});

test('HTTP/1.1 without Host, and CONNECT, get an Error body', async (t) => {
  const { app } = await setup(t);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const noHost = parseRaw(await raw(port, 'GET /healthz HTTP/1.1\r\n\r\n'));
  assert.equal(noHost.status, 400);
  assert.equal(noHost.body.error, 40006n);
  assert.match(noHost.headers, /x-request-id: /);
  const tunnel = parseRaw(await raw(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(tunnel.status, 400);
  assert.deepEqual(tunnel.body, { error: 40006n, message: 'CONNECT is not supported.' });
});
