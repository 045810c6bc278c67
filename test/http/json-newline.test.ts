import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { setup } from '../helpers/setup.js';

// Every JSON body ends with a newline, so that `curl -i` leaves the prompt on a line of its
// own; its Content-Length counts it, and its ETag (made from the plant) is the same as ever.

test('answers, errors and the OpenAPI document end with a newline, counted', async (t) => {
  const { call } = await setup(t);
  const created = await call({ method: 'POST', url: '/plants', json: '{"id":7,"name":"Fern"}' });
  const answers = {
    created,
    read: await call({ method: 'GET', url: '/plants/7' }),
    list: await call({ method: 'GET', url: '/plants' }),
    'an error of the operation': await call({ method: 'GET', url: '/plants/8' }),
    'a malformed URL (a framework error)': await call({ method: 'GET', url: '/plants/%zz' }),
    'no route': await call({ method: 'GET', url: '/nowhere' }),
    'no token': await call({ method: 'GET', url: '/plants/7', token: null }),
    'the OpenAPI document': await call({ method: 'GET', url: '/openapi.json' }),
  };
  for (const [what, answer] of Object.entries(answers)) {
    assert.match(String(answer.headers['content-type']), /^application\/json/, what);
    assert.ok(
      answer.body.endsWith('}\n') || answer.body.endsWith(']\n'),
      `${what}: ${answer.body}`,
    );
    assert.equal(Number(answer.headers['content-length']), Buffer.byteLength(answer.body), what);
    JSON.parse(answer.body);
  }
  assert.equal(answers.read.body, '{"id":7,"name":"Fern"}\n');
  assert.equal(answers.read.headers.etag, created.headers.etag, 'the ETag is the plant’s');
  // What is no JSON is left as it is: no body, or the page and its assets.
  assert.equal((await call({ method: 'DELETE', url: '/plants/7' })).body, '');
  const page = await call({ method: 'GET', url: '/docs' });
  assert.ok(page.body.endsWith('</html>\n'));
});

test("an answer written straight to the socket (Node's parser refused it) ends so too", async (t) => {
  const { app } = await setup(t);
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = new URL(base);
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () =>
      socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    );
    let got = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => (got += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
  });
  assert.match(text, /^HTTP\/1\.1 431 /);
  const [head, body] = text.split('\r\n\r\n') as [string, string];
  assert.ok(body.endsWith('}\n'), body);
  assert.equal(Number(/content-length: (\d+)/i.exec(head)![1]), Buffer.byteLength(body));
});
