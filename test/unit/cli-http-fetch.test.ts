import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { httpFetch } from '../../src/cli/http-fetch.js';
import { closedBeforeAnswer, describeFailure } from '../../src/cli/plants-client.js';

// The CLI's fetch on node:http (src/cli/http-fetch.ts), against a real server on loopback:
// what the client package relies on fetch for, and failures that read as fetch's do.

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void;

async function serve(t: TestContext, handler: Handler) {
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ method: request.method!, url: request.url!, headers: request.headers, body });
      handler(request, response, body);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections++;
    sockets.add(socket);
    // The server's side never keeps this process alive: only the client's could.
    socket.unref();
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, connections: () => connections, sockets };
}

describe('the CLI fetch on node:http', () => {
  it('sends the method, headers and a string body; answers status, headers and body', async (t) => {
    const server = await serve(t, (_request, response) => {
      response.writeHead(201, 'Created', { 'content-type': 'application/json', 'x-two': 'b' });
      response.end('{"id":9007199254740993}');
    });
    const answer = await httpFetch(new URL(`${server.url}/plants?x=1`), {
      method: 'POST',
      headers: { authorization: 'Bearer pst_x', 'Content-Type': 'application/json' },
      body: '{"name":"Fern é"}',
    });
    assert.equal(answer.status, 201);
    assert.equal(answer.statusText, 'Created');
    assert.equal(answer.ok, true);
    assert.equal(answer.headers.get('x-two'), 'b');
    assert.equal(await answer.text(), '{"id":9007199254740993}');
    const [sent] = server.received;
    assert.equal(sent?.method, 'POST');
    assert.equal(sent?.url, '/plants?x=1');
    assert.equal(sent?.headers.authorization, 'Bearer pst_x');
    assert.equal(sent?.headers['content-type'], 'application/json');
    assert.equal(sent?.headers['content-length'], String(Buffer.byteLength('{"name":"Fern é"}')));
    assert.equal(sent?.body, '{"name":"Fern é"}');
  });

  it('answers 204 with no body, and keeps one connection for requests in turn', async (t) => {
    const server = await serve(t, (_request, response) => {
      response.writeHead(204);
      response.end();
    });
    for (let i = 0; i < 3; i++) {
      const answer = await httpFetch(`${server.url}/plants/1`, { method: 'DELETE' });
      assert.equal(answer.status, 204);
      assert.equal(answer.body, null);
      assert.equal(await answer.text(), '');
    }
    assert.equal(server.connections(), 1);
    // Its idle connection does not keep the process alive (the server's sockets are unref'd).
    assert.ok(
      !process.getActiveResourcesInfo().includes('TCPSocketWrap'),
      `${process.getActiveResourcesInfo()}`,
    );
  });

  it('gives the body as it comes, a stream an abort ends', async (t) => {
    let finish: (() => void) | undefined;
    const server = await serve(t, (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(': hello\n\n');
      finish = () => response.end('id: 1\n\n');
    });
    const first = await httpFetch(`${server.url}/events`);
    const reader = first.body!.getReader();
    assert.equal(new TextDecoder().decode((await reader.read()).value), ': hello\n\n');
    finish!();
    assert.equal(new TextDecoder().decode((await reader.read()).value), 'id: 1\n\n');
    assert.equal((await reader.read()).done, true);

    const abort = new AbortController();
    const second = await httpFetch(`${server.url}/events`, { signal: abort.signal });
    const reading = second.body!.getReader();
    await reading.read();
    abort.abort();
    await assert.rejects(reading.read());
  });

  it('rejects with the reason of an abort before the answer, and closes the connection', async (t) => {
    const server = await serve(t, () => undefined);
    const abort = new AbortController();
    const asked = httpFetch(`${server.url}/events?wait=30s`, { signal: abort.signal });
    while (server.received.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const [socket] = server.sockets;
    const closed = once(socket!, 'close');
    abort.abort();
    await assert.rejects(asked, { name: 'AbortError' });
    await closed;
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(httpFetch(server.url, { signal: aborted.signal }), { name: 'AbortError' });
  });

  it('fails as fetch does: a TypeError whose cause is the system error', async (t) => {
    const server = await serve(t, (_request, response) => response.socket?.destroy());
    const cut = await httpFetch(`${server.url}/plants`, { method: 'POST', body: '{}' }).then(
      () => assert.fail('answered'),
      (error: unknown) => error,
    );
    assert.ok(cut instanceof TypeError);
    assert.match(closedBeforeAnswer(cut) ?? '', /closed the connection before answering/);

    const { url } = server;
    server.sockets.forEach((socket) => socket.destroy());
    const closedServer = createServer();
    closedServer.listen(0, '127.0.0.1');
    await once(closedServer, 'listening');
    const { port } = closedServer.address() as AddressInfo;
    closedServer.close();
    await once(closedServer, 'close');
    const refused = await httpFetch(`http://127.0.0.1:${port}/`).then(
      () => assert.fail('answered'),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof TypeError);
    assert.equal((refused.cause as { code?: string }).code, 'ECONNREFUSED');
    assert.match(describeFailure(refused, url), /^cannot reach .*ECONNREFUSED/);
  });
});
