import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { ConnectionGuard } from '../../src/http/connections.js';
import { STALLED_FOR_ROOM_MS } from '../../src/http/unsent-answers.js';
import { beyondTheKernel } from '../helpers/tcp-buffers.js';
import { setup } from '../helpers/setup.js';
import { until } from '../helpers/until.js';

// The bounds of one connection, through the guard alone (a handler that answers when the
// test says) and through the app on a listening server: requests in flight, pipelining,
// and what HTTP/1.x forbids that Node's parser lets through.

const healthz = (id: number) => `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: r${id}\r\n\r\n`;

/** A connection to `port` on 127.0.0.1 from `from` (any of 127.0.0.0/8 is this host). */
function openSocket(t: TestContext, port: number, from = '127.0.0.1'): Socket {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => undefined);
  t.after(() => socket.destroy());
  return socket;
}

async function guarded(
  t: TestContext,
  limits: { inFlight: number; pipelined: number; maxConnections?: number } = {
    inFlight: 3,
    pipelined: 6,
  },
  now: () => number = Date.now,
) {
  const held: ServerResponse[] = [];
  const guard = new ConnectionGuard({ ...limits, sendTimeoutMs: 60_000 }, now);
  const server = guard.createServer(
    (_request, response) => {
      held.push(response);
    },
    { keepAliveTimeout: 60_000 },
  );
  let accepted = 0;
  server.on('connection', () => (accepted += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    held,
    guard,
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
  };
}

test('a connection has at most `inFlight` requests handed on; the rest wait their turn', async (t) => {
  const { held, port } = await guarded(t);
  const socket = openSocket(t, port);
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  socket.write([1, 2, 3, 4, 5].map(healthz).join(''));
  await until(() => held.length === 3, 'three requests handed on');
  // The two others were parsed (they came in the same read) but wait.
  await new Promise((resolve) => setTimeout(resolve, 50).unref());
  assert.equal(held.length, 3);
  held[0]!.end('one');
  await until(() => held.length === 4, 'the fourth handed on after one answer');
  for (const response of held.slice(1)) response.end('more');
  await until(() => held.length === 5, 'the fifth');
  held[4]!.end('five');
  await until(() => text.split('HTTP/1.1 200').length === 6, 'five answers');
  assert.equal(socket.destroyed, false, 'a client within the bounds keeps its connection');
});

test('a client that pipelines beyond `pipelined` without answers is disconnected', async (t) => {
  const { held, port } = await guarded(t);
  const socket = openSocket(t, port);
  const closed = new Promise((resolve) => socket.on('close', resolve));
  socket.write(Array.from({ length: 7 }, (_, i) => healthz(i)).join(''));
  await closed;
  assert.equal(held.length, 3, 'only the first three were handed on');
});

test('reading stops while a connection has `inFlight` unanswered requests', async (t) => {
  const { held, port } = await guarded(t, { inFlight: 2, pipelined: 4 });
  const socket = openSocket(t, port).resume();
  socket.write(healthz(1) + healthz(2));
  await until(() => held.length === 2, 'two requests');
  // Sent after the server stopped reading: were it read, 3 + 2 waiting would be over 4.
  socket.write(healthz(3) + healthz(4) + healthz(5));
  await new Promise((resolve) => setTimeout(resolve, 100).unref());
  assert.equal(socket.destroyed, false);
  assert.equal(held.length, 2);
  held[0]!.end('a');
  held[1]!.end('b');
  await until(() => held.length === 4, 'reading resumed');
});

test('reading stays stopped after an answer in progress drains the socket', async (t) => {
  // Node resumes reading on every drain of the socket (socketOnDrain in _http_server.js),
  // whoever paused it: here the answer in flight writes more than the socket buffers, so
  // its drain comes while the connection must still not be read.
  const { held, port, guard } = await guarded(t, { inFlight: 1, pipelined: 8 });
  const socket = openSocket(t, port);
  let text = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
  socket.write(healthz(1));
  await until(() => held.length === 1, 'the first request');
  const first = held[0]!;
  const drained = new Promise((resolve) => first.socket!.once('drain', resolve));
  first.write(Buffer.alloc(1 << 20, 'x'));
  await drained;
  await until(() => text.length > 1 << 20, 'the written part taken');
  socket.write(healthz(2) + healthz(3) + healthz(4));
  // A request on another connection, sent after those: once it is handed on, the server
  // has had its turn to read the first connection too, were it reading.
  openSocket(t, port).write(healthz(5));
  await until(() => held.length === 2, "the other connection's request");
  assert.equal(guard.unanswered(), 2, 'nothing more read from the first connection');
  first.end();
  for (let answered = 2; answered < 5; answered += 1) {
    await until(() => held.length === answered + 1, `request ${answered}`);
    held[answered]!.end('more');
  }
  await until(() => text.split('HTTP/1.1 200').length === 5, 'four answers');
});

test('reading stays stopped when an answer queued behind another is written first', async (t) => {
  // Node resumes reading then too (socketOnDrain, called with no drain event).
  const { held, port, guard } = await guarded(t, { inFlight: 2, pipelined: 8 });
  const socket = openSocket(t, port);
  let text = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
  socket.write(healthz(1) + healthz(2));
  await until(() => held.length === 2, 'two requests, as many as may be answered at once');
  held[1]!.end('second');
  socket.write(healthz(3) + healthz(4) + healthz(5));
  // Once a request sent after those on another connection is handed on, the server has had
  // its turn to read the first connection too, were it reading.
  openSocket(t, port).write(healthz(6));
  await until(() => held.length === 3, "the other connection's request");
  assert.equal(guard.unanswered(), 3, 'nothing more read from the first connection');
  held[0]!.end('first');
  for (let answered = 3; answered < 6; answered += 1) {
    await until(() => held.length > answered, `request ${answered}`);
    held[answered]!.end('more');
  }
  await until(() => text.split('HTTP/1.1 200').length === 6, 'five answers');
});

test('a connection left unread until its socket drains is read again after the drain', async (t) => {
  const { held, port } = await guarded(t, { inFlight: 2, pipelined: 8 });
  const socket = openSocket(t, port).pause();
  socket.write(healthz(1) + healthz(2));
  await until(() => held.length === 2, 'two requests, as many as may be answered at once');
  // The second answer, queued behind the first, goes out when the first ends: more than the
  // kernel takes, so the socket needs a drain when the first is done and one fewer is in flight.
  held[1]!.write(Buffer.alloc(beyondTheKernel() << 20, 'x'));
  const firstDone = new Promise((resolve) => held[0]!.once('close', resolve));
  held[0]!.end('one');
  await firstDone;
  assert.equal(held[1]!.socket!.writableNeedDrain, true);
  socket.resume();
  await new Promise((resolve) => held[1]!.socket!.once('drain', resolve));
  socket.write(healthz(3));
  await until(() => held.length === 3, 'the third request, while the second is still answered');
});

test('every answer of a connection that closes sees its close, those queued too', async (t) => {
  // Node emits 'close' only on the answer that has the socket; one queued behind it (a
  // pipelined request being answered) would wait for good, and whatever it holds with it.
  // Fewer than `inFlight`: a connection not read cannot see its client go.
  const { held, port } = await guarded(t, { inFlight: 3, pipelined: 4 });
  const socket = openSocket(t, port);
  socket.write(healthz(1) + healthz(2));
  await until(() => held.length === 2, 'two requests being answered');
  const queuedClosed = new Promise((resolve) => held[1]!.once('close', resolve));
  const first = new Promise((resolve) => held[0]!.once('close', resolve));
  socket.destroy();
  // Node's close of the first and the guard's of the second come from the socket's one
  // 'close': once the first is heard, the second has been too, or never will be.
  await first;
  assert.equal(held[1]!.destroyed, true, 'the queued answer is closed with its connection');
  await queuedClosed;
});

/** The app of `setup` listening on a port, with a token that may create plants. */
async function listening(t: TestContext) {
  const { app, token } = await setup(t);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { token, port: (app.server.address() as AddressInfo).port };
}

/** Sends `data` and collects everything answered until the server closes or `ms` pass. */
function exchange(t: TestContext, port: number, data: string, ms = 5_000) {
  return new Promise<{ text: string; closed: boolean }>((resolve) => {
    const socket = openSocket(t, port);
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    const timer = setTimeout(() => resolve({ text, closed: false }), ms).unref();
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
    socket.write(data);
  });
}

test('pipelined requests within the bound are all answered, in order', async (t) => {
  const { port } = await listening(t);
  const socket = openSocket(t, port);
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  socket.write(Array.from({ length: 40 }, (_, i) => healthz(i)).join(''));
  await until(() => text.split('{"status":"ok"}').length === 41, '40 answers');
  const ids = [...text.matchAll(/x-request-id: (r\d+)/gi)].map((match) => match[1]);
  assert.deepEqual(
    ids,
    Array.from({ length: 40 }, (_, i) => `r${i}`),
  );
});

test('a request refused before its body arrived gets one answer, and the connection closes', async (t) => {
  const { port } = await listening(t);
  // Content-Length says 100, 4 bytes come: the 401 must not be followed, once the request
  // timeout passes, by a 408 on the same connection.
  const { text, closed } = await exchange(
    t,
    port,
    'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      'Content-Length: 100\r\n\r\n{"na',
  );
  assert.ok(closed, 'the server closed the connection');
  assert.equal(text.split('HTTP/1.1 ').length, 2, `one answer: ${text}`);
  assert.match(text, /^HTTP\/1\.1 401 /);
  assert.match(text, /\r\nconnection: close\r\n/i);
  // A refusal of a request whose body is complete keeps the connection.
  const whole = await exchange(
    t,
    port,
    'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      'Content-Length: 2\r\n\r\n{}',
    500,
  );
  assert.match(whole.text, /^HTTP\/1\.1 401 /);
});

test('two Host headers are 400, a version other than 1.0 and 1.1 is 505', async (t) => {
  const { port } = await listening(t);
  const twice = await exchange(t, port, 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 500);
  assert.match(twice.text, /^HTTP\/1\.1 400 /);
  assert.match(twice.text, /\{"error":40006,"message":"A request has one Host header/);
  const http10 = await exchange(t, port, 'GET /healthz HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n');
  assert.match(http10.text, /^HTTP\/1\.1 400 /);
  const http2 = await exchange(t, port, 'GET /plants HTTP/2.0\r\n\r\n');
  assert.match(http2.text, /^HTTP\/1\.1 505 /);
  assert.match(http2.text, /\r\ncontent-type: application\/json/i);
  assert.match(http2.text, /\{"error":50501,"message":"HTTP\/2\.0 is not supported/);
  const fine = await exchange(t, port, 'GET /healthz HTTP/1.0\r\n\r\n');
  assert.match(fine.text, /^HTTP\/1\.1 200 /);
});

test('100 Continue is sent only after authentication', async (t) => {
  const { token, port } = await listening(t);
  const head = (auth: string) =>
    `POST /plants HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
    'Content-Length: 15\r\nExpect: 100-continue\r\n\r\n';
  const refused = await exchange(t, port, head(''));
  assert.match(refused.text, /^HTTP\/1\.1 401 /, 'no 100 Continue before the refusal');
  assert.ok(refused.closed);

  const socket = openSocket(t, port);
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  socket.write(head(`Authorization: Bearer ${token}\r\n`));
  await until(() => text.includes('\r\n\r\n'), 'an interim answer');
  assert.equal(text, 'HTTP/1.1 100 Continue\r\n\r\n');
  socket.write('{"name":"Fern"}');
  await until(() => text.includes('"name":"Fern"'), 'the created plant');
  assert.match(text, /\r\n\r\nHTTP\/1\.1 201 /);
});

test('at the connection limit, only an idle connection makes room; one being worked on never', async (t) => {
  const { held, port } = await guarded(t, { inFlight: 3, pipelined: 6, maxConnections: 2 });
  const closed = (socket: Socket) => new Promise<void>((resolve) => socket.once('close', resolve));
  // Two connections, each with a request being answered.
  const busy = [openSocket(t, port), openSocket(t, port)];
  busy.forEach((socket, i) => socket.write(healthz(i)));
  await until(() => held.length === 2, 'two requests being answered');
  // A third, from another address, has no room: closed at once, and the two are kept.
  const refused = openSocket(t, port, '127.0.0.2');
  await closed(refused);
  assert.ok(busy.every((socket) => !socket.destroyed));
  // One answered, its connection idle: the next newcomer takes its place.
  held[0]!.end('one');
  let text = '';
  busy[0]!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  await until(() => text.endsWith('one'), 'the first answer');
  const idleClosed = closed(busy[0]!);
  const newcomer = openSocket(t, port);
  newcomer.write(healthz(3));
  await until(() => held.length === 3, 'the newcomer served');
  await idleClosed;
  assert.equal(busy[1]!.destroyed, false, 'the connection being answered is kept');
});

/** Opens a connection from `from` with one request: whether it was handed on (in `held`). */
function knock(t: TestContext, port: number, from: string, held: unknown[]): Promise<boolean> {
  const before = held.length;
  const socket = openSocket(t, port, from);
  socket.write(healthz(before));
  return new Promise((resolve) => {
    socket.once('close', () => resolve(held.length > before));
    const look = () => {
      if (held.length > before) resolve(true);
      else if (!socket.destroyed) setImmediate(look);
    };
    look();
  });
}

/** The guard's reports of what it closed or refused at the limit, one a sweep at most. */
function reports(guard: ConnectionGuard): unknown[] {
  const lines: unknown[] = [];
  guard.useLog({ warn: (fields: unknown) => lines.push(fields) } as unknown as FastifyBaseLogger);
  return lines;
}

/** An answer beyond what the kernel takes, to the request of `socket` in `held`, unread. */
function stall(socket: Socket, held: ServerResponse[]): void {
  socket.pause();
  const answer = held.find((response) => response.socket?.remotePort === socket.localPort);
  answer!.end(Buffer.alloc(beyondTheKernel() << 20, 'x'));
}

test('at the limit, a connection whose client reads nothing makes room for another address', async (t) => {
  // Without it, one address could hold every connection busy without a token (asking for
  // large answers it never reads) and lock every other client out until the send timeout.
  let clock = 0;
  const limits = { inFlight: 3, pipelined: 6, maxConnections: 2 };
  const { held, guard, port } = await guarded(t, limits, () => clock);
  const lines = reports(guard);
  const hog = [openSocket(t, port), openSocket(t, port)];
  hog.forEach((socket, i) => socket.write(healthz(i)));
  await until(() => held.length === 2, 'two requests being answered');
  // The sweeps so far saw it idle at 0 ms: its stall counts from the first that sees it.
  const begun = (clock = 2_000);
  stall(hog[0]!, held);
  // Refused until the guard's sweeps have seen the answer stall for STALLED_FOR_ROOM_MS,
  // the clock moving on 2 s a sweep; then let in.
  for (let refused = 0; !(await knock(t, port, '127.0.0.2', held)); refused++) {
    assert.ok(refused < 10, 'let in within a few sweeps');
    await until(() => lines.length > refused, 'the next sweep');
    clock += 2_000;
  }
  // Each refusal was reported, naming the address holding the most.
  assert.deepEqual(lines[0], {
    maxConnections: 2,
    idleClosed: 0,
    stalledClosed: 0,
    refused: 1,
    busiestAddress: '127.0.0.1',
    itsConnections: 2,
  });
  // The sweep that found it stalled long enough ran before the clock's last move.
  const sweptAt = clock - 2_000;
  assert.ok(sweptAt - begun >= STALLED_FOR_ROOM_MS, `let in after a ${sweptAt - begun} ms stall`);
  // Its client reads again, to find the connection closed.
  hog[0]!.resume();
  await until(() => hog[0]!.destroyed, 'the stalled connection closed');
  assert.equal(hog[1]!.destroyed, false, 'the one being worked on is kept');
  // One each now, neither stalled: a third address finds no room.
  assert.equal(await knock(t, port, '127.0.0.3', held), false);
  assert.equal(hog[1]!.destroyed, false);
});

test('at the limit, an address opening connections over and over closes none of another', async (t) => {
  let clock = 0;
  const limits = { inFlight: 3, pipelined: 6, maxConnections: 3 };
  const { held, guard, port } = await guarded(t, limits, () => clock);
  const lines = reports(guard);
  // A client of another address, answered: its connection idle longest.
  const client = openSocket(t, port, '127.0.0.2');
  let text = '';
  client.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  client.write(healthz(0));
  await until(() => held.length === 1, 'the client served');
  held[0]!.end('one');
  await until(() => text.endsWith('one'), 'its answer');
  // The hog takes the other two places, one stalled (one only: two would be past the bound
  // of what all connections may hold unsent), then knocks again and again.
  const hog = [openSocket(t, port), openSocket(t, port)];
  hog.forEach((socket, i) => socket.write(healthz(i + 1)));
  await until(() => held.length === 3, 'the hog served');
  stall(hog[0]!, held);
  // Before and after the guard has seen its answer stall for STALLED_FOR_ROOM_MS.
  for (let sweeps = 0; sweeps < 3; sweeps++) {
    assert.equal(await knock(t, port, '127.0.0.1', held), false, 'the hog refused');
    await until(() => lines.length > sweeps, 'the next sweep');
    clock += STALLED_FOR_ROOM_MS;
  }
  assert.equal(client.destroyed, false, 'the idle client kept');
  client.write(healthz(9));
  await until(() => held.length === 4, 'the client served again');
});

test('at the connection limit, connections that never sent a whole request make room', async (t) => {
  // As slowloris holds them: a few bytes of a request line, then nothing.
  const { held, port, accepted } = await guarded(t, {
    inFlight: 3,
    pipelined: 6,
    maxConnections: 3,
  });
  const silent = [0, 1, 2].map(() => openSocket(t, port));
  silent.forEach((socket) => socket.write('GET /hea'));
  await until(() => accepted() === 3, 'the silent connections accepted');
  const allClosed = Promise.all(
    silent.map((socket) => new Promise((resolve) => socket.once('close', resolve))),
  );
  const clients = [0, 1, 2].map(() => openSocket(t, port));
  clients.forEach((socket, i) => socket.write(healthz(i)));
  await until(() => held.length === 3, 'the three clients served');
  await allClosed;
});

test('while an answer waits unsent, no more requests of its connection are handed on', async (t) => {
  // More than the kernel's buffers on both sides can take, as a client that stopped reading
  // leaves it: the answer waits in the process, and so would the others, each its own.
  const body = Buffer.alloc(beyondTheKernel() << 20, 'x');
  let handedOn = 0;
  const guard = new ConnectionGuard({ inFlight: 3, pipelined: 6, sendTimeoutMs: 60_000 });
  const server = guard.createServer(
    (_request, response) => {
      handedOn += 1;
      response.end(body);
    },
    { keepAliveTimeout: 5_000 },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const socket = openSocket(t, (server.address() as AddressInfo).port);
  socket.pause();
  socket.write([1, 2, 3].map(healthz).join(''));
  await until(() => guard.unanswered() === 3, 'the three requests parsed');
  assert.equal(handedOn, 1, 'the second and third wait for the first answer to be taken');
  let received = 0;
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  socket.resume();
  await until(() => received > 3 * body.length, 'the three answers', 60_000);
  assert.equal(handedOn, 3);
});
