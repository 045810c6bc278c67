import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { cli, type LogLine, type Server, sleep, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The limits of the HTTP edge against a real `plantstore serve` over TCP: slow and idle
// clients are cut off at the configured timeouts, oversized and hostile input is refused
// with the Error body, and the process goes on serving. Each timeout is set well below its
// default, and each bound checked sits below the default, so a test fails if the option
// were ignored. Node checks the header and request timeouts once a second: bounds allow
// for that, and for a busy machine.

interface Exchange {
  /** Everything the server sent. */
  text: string;
  /** Milliseconds from the first byte sent until the server closed the connection. */
  closedAfterMs: number;
}

/**
 * Sends `head` at once, then `drip` one byte every `everyMs` until the server closes the
 * connection (or `giveUpMs` passes, which fails the test). `onText` is given all that was
 * received so far, each time more arrives.
 */
function exchange(
  server: Server,
  head: string,
  {
    drip = '',
    everyMs = 1_000,
    giveUpMs = 20_000,
    onText = (text: string): void => void text,
  } = {},
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    const started = Date.now();
    let text = '';
    let sent = 0;
    const dripper = setInterval(() => {
      if (sent < drip.length && socket.writable) socket.write(drip[sent++]!);
    }, everyMs);
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server still held the connection after ${giveUpMs} ms: ${text}`));
    }, giveUpMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      onText(text);
    });
    // Writing after the server closed is expected here; the close below reports.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(dripper);
      clearTimeout(giveUp);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
    socket.write(head);
  });
}

/** Status and parsed body of the first answer in `text`. */
function firstAnswer(text: string): { status: number; head: string; body: unknown } {
  const split = text.indexOf('\r\n\r\n');
  assert.ok(split > 0, `an HTTP answer, got ${JSON.stringify(text.slice(0, 200))}`);
  const head = text.slice(0, split);
  const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
  const body = text.slice(split + 4, split + 4 + length);
  return { status: Number(head.split(' ')[1]), head, body: body === '' ? '' : JSON.parse(body) };
}

function assertTimeoutAnswer(text: string): void {
  const answer = firstAnswer(text);
  assert.equal(answer.status, 408, text);
  assert.match(answer.head, /\r\ncontent-type: application\/json/i);
  assert.deepEqual(answer.body, { error: 40801, message: 'The request took too long to arrive.' });
}

/** A server started with `args`, and a token with every scope on its database. */
async function serve(t: TestContext, args: string[]): Promise<{ server: Server; token: string }> {
  const db = join(makeTempDir(t), 'limits.db');
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  return { server: await startServer(t, ['--db', db, ...args]), token };
}

/** The process is alive and serves a plain request. */
async function assertServing(server: Server): Promise<void> {
  assert.equal(server.child.exitCode, null, 'the process is still running');
  const res = await fetch(`${server.url}/healthz`);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '{"status":"ok"}\n');
}

test('a header section sent a byte a second is cut off at --headers-timeout (408)', async (t) => {
  const { server } = await serve(t, ['--headers-timeout', '2s']);
  const slow = await exchange(server, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ', {
    drip: 'a'.repeat(30),
  });
  assertTimeoutAnswer(slow.text);
  // 2 s plus Node's once-a-second check; the default (10 s) would fail this.
  assert.ok(slow.closedAfterMs >= 1_900, `cut off early: ${slow.closedAfterMs} ms`);
  assert.ok(slow.closedAfterMs < 7_000, `cut off late: ${slow.closedAfterMs} ms`);
  // A connection that sends nothing at all is cut off the same way.
  const silent = await exchange(server, '');
  assertTimeoutAnswer(silent.text);
  assert.ok(silent.closedAfterMs < 7_000, `silent held for ${silent.closedAfterMs} ms`);
  await assertServing(server);
});

test('a body sent a byte every half second is cut off at --request-timeout (408)', async (t) => {
  const { server, token } = await serve(t, ['--request-timeout', '3s']);
  const body = `{"name":"${'x'.repeat(60)}"}`;
  const slow = await exchange(
    server,
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    { drip: body, everyMs: 500 },
  );
  assertTimeoutAnswer(slow.text);
  // The headers arrived at once: only the request timeout (default 30 s) can end this.
  assert.ok(slow.closedAfterMs >= 2_900, `cut off early: ${slow.closedAfterMs} ms`);
  assert.ok(slow.closedAfterMs < 9_000, `cut off late: ${slow.closedAfterMs} ms`);
  await assertServing(server);
});

test('an idle keep-alive connection is closed after --keep-alive-timeout', async (t) => {
  // A header timeout shorter than the idle time shows that idling is not a slow request.
  const { server } = await serve(t, ['--keep-alive-timeout', '3s', '--headers-timeout', '1s']);
  const { port } = new URL(server.url);
  const socket: Socket = connect(Number(port), '127.0.0.1');
  t.after(() => socket.destroy());
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
  const answers = async (count: number) => {
    while (text.split('{"status":"ok"}').length <= count) await sleep(20);
    return Date.now();
  };
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await answers(1);
  assert.match(text, /\r\nKeep-Alive: timeout=3\r\n/i);
  await sleep(2_000);
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  const second = await answers(2);
  assert.match(text.slice(text.lastIndexOf('HTTP/1.1')), /^HTTP\/1\.1 200 /);
  // Node closes a second after the timeout it advertises, so a client honouring
  // `Keep-Alive: timeout=3` closes first. The default (72 s) would fail this.
  const idle = (await Promise.race([closed, sleep(15_000).then(() => Infinity)])) - second;
  assert.ok(idle >= 2_900, `closed early: after ${idle} ms`);
  assert.ok(idle < 8_000, `closed late: after ${idle} ms`);
  await assertServing(server);
});

test('SIGTERM cuts off a request still running after --shutdown-grace, then exits 0', async (t) => {
  const { server, token } = await serve(t, ['--shutdown-grace', '1s', '--request-timeout', '60s']);
  // 100 Continue comes once the request is authenticated: it is in flight then.
  const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
  let inFlight!: () => void;
  const continued = new Promise<void>((resolve) => (inFlight = resolve));
  const dripping = exchange(
    server,
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      'Content-Type: application/json\r\nExpect: 100-continue\r\n' +
      'Content-Length: 1000\r\n\r\n',
    {
      drip: 'x'.repeat(1000),
      everyMs: 200,
      onText: (text) => {
        if (text === CONTINUE) inFlight();
      },
    },
  );
  await continued;
  const stopped = Date.now();
  server.child.kill('SIGTERM');
  const exit = await Promise.race([server.exited, sleep(9_000).then(() => 'still running')]);
  const took = Date.now() - stopped;
  assert.deepEqual(exit, { code: 0, signal: null }, `after ${took} ms`);
  // The default grace (10 s) would fail this.
  assert.ok(took >= 900, `exited before the grace period: ${took} ms`);
  assert.ok(took < 6_000, `exited late: ${took} ms`);
  assert.equal((await dripping).text, CONTINUE, 'cut off without an answer');
});

test('oversized and hostile input over TCP gets an Error body; the process serves on', async (t) => {
  const { server, token } = await serve(t, []);
  const post = (body: string, extra = '') =>
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n` +
    `Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const cases: [string, string, number, number][] = [
    [
      'header section over 16 KiB',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
      431,
      43101,
    ],
    ['body over 64 KiB', post(`{"name":"${'a'.repeat(64 * 1024)}"}`), 413, 41301],
    [
      'body over 64 KiB, chunked',
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
        `10000\r\n{"name":"${'a'.repeat(0x10000 - 9)}\r\n10\r\n${'a'.repeat(14)}"}\r\n0\r\n\r\n`,
      413,
      41301,
    ],
    ['JSON nested 30,000 deep', post('['.repeat(30_000) + ']'.repeat(30_000)), 400, 40009],
    [
      'object nested 10,000 deep in a field',
      post(`{"name":"x","tag":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`),
      400,
      40009,
    ],
    ['array of 30,000 items', post(`{"name":"x","tag":[${'1,'.repeat(29_999)}1]}`), 400, 40009],
  ];
  for (const [what, request, status, error] of cases) {
    const { text } = await exchange(server, request, { giveUpMs: 10_000 });
    const answer = firstAnswer(text);
    assert.equal(answer.status, status, `${what}: ${text.slice(0, 300)}`);
    assert.equal((answer.body as { error: number }).error, error, what);
    await assertServing(server);
  }
  const created = await fetch(`${server.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"id":1,"name":"Fern"}',
  });
  assert.equal(created.status, 201, await created.text());
});

/** `count` connections that each send `data` and never read a byte of the answers. */
function nonReaders(t: TestContext, port: string, count: number, data: string | Buffer): void {
  const sockets = Array.from({ length: count }, () => {
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.pause();
    socket.write(data);
    return socket;
  });
  t.after(() => sockets.forEach((socket) => socket.destroy()));
}

/** The server's resident memory in MB, as the kernel counts it. */
function rssMb(server: Server): number {
  const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024;
}

/**
 * A server serving, and how much its RSS grew at most since then (in MB, sampled every 25
 * ms until asked).
 */
async function servingMeasured(t: TestContext) {
  const { server } = await serve(t, []);
  const { port } = new URL(server.url);
  await assertServing(server);
  const before = rssMb(server);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(server))), 25);
  t.after(() => clearInterval(sampler));
  const grown = () => {
    clearInterval(sampler);
    return peak - before;
  };
  return { server, port, grown };
}

test('pipelined floods that never read their answers leave memory bounded', async (t) => {
  const { server, port, grown } = await servingMeasured(t);
  // 40 connections, each 1 MiB of pipelined requests (about 30,000) and never a read: on
  // an unguarded server this took RSS up by about 480 MB and /healthz to 20 s.
  const flood = Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(30_000));
  nonReaders(t, port, 40, flood);
  const flooding = (line: LogLine) => line.reason === 'too many pipelined requests';
  await server.waitForLog(flooding, 'a flooding connection closed');
  const started = Date.now();
  await assertServing(server);
  const took = Date.now() - started;
  await until(() => server.logs.filter(flooding).length === 40, 'every flood cut off', 30_000);
  const mb = grown();
  assert.ok(took < 5_000, `/healthz took ${took} ms during the flood`);
  assert.ok(mb < 200, `RSS grew by ${Math.round(mb)} MB`);
});

test('clients pipelining requests for the OpenAPI document and never reading hold no copy each', async (t) => {
  const { server, port, grown } = await servingMeasured(t);
  // 300 connections, 60 requests each for the ~190 KB document (more than loopback's
  // buffers take), and no reading after the first bytes. Its text sent as a string was
  // copied for each answer the kernel did not take, up to 8 a connection: RSS grew by about
  // 190 MB here. As one shared Buffer, what waits is a reference (about 40 MB).
  let started = 0;
  const sockets = Array.from({ length: 300 }, () => {
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write('GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(60));
    // The first bytes of the first answer, then no more reading.
    socket.once('data', () => {
      socket.pause();
      started += 1;
    });
    return socket;
  });
  t.after(() => sockets.forEach((socket) => socket.destroy()));
  await until(() => started === sockets.length, 'an answer begun on every connection', 30_000);
  await assertServing(server);
  const mb = grown();
  t.diagnostic(`RSS grew by ${Math.round(mb)} MB`);
  assert.ok(mb < 120, `RSS grew by ${Math.round(mb)} MB`);
});

test('an answer the client does not read closes its connection at --send-timeout', async (t) => {
  const { server } = await serve(t, ['--send-timeout', '2s', '--max-connections', '4']);
  const { port } = new URL(server.url);
  // Four pipelined copies of the 1.7 MB Swagger UI bundle are more than the kernel's
  // buffers hold on loopback, so the server is left with an answer it cannot send.
  const request = 'GET /docs/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(4);
  const started = Date.now();
  nonReaders(t, port, 4, request);
  const cut = (line: LogLine) => line.reason === 'answer not read within the send timeout';
  await server.waitForLog(cut, 'a stalled connection closed', 15_000);
  await until(() => server.logs.filter(cut).length === 4, 'all four closed');
  const took = Date.now() - started;
  // 2 s plus a sweep a second; the default (30 s) would fail this.
  assert.ok(took >= 1_900, `cut off early: ${took} ms`);
  assert.ok(took < 10_000, `cut off late: ${took} ms`);
  // Their slots are free again: a new client is served.
  await assertServing(server);
});

test('a client reading its answer slowly is not cut off by the send timeout', async (t) => {
  const { server } = await serve(t, ['--send-timeout', '2s']);
  const { port } = new URL(server.url);
  const socket = connect(Number(port), '127.0.0.1');
  t.after(() => socket.destroy());
  let received = 0;
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  socket.pause();
  socket.write('GET /docs/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(4));
  // Reads in bursts a second apart: slower than the server sends, never stalled 2 s.
  const reader = setInterval(() => {
    socket.resume();
    setTimeout(() => socket.pause(), 50);
  }, 1_000);
  t.after(() => clearInterval(reader));
  await until(() => received > 4 * 1_700_000 || socket.destroyed, 'the four answers', 60_000);
  clearInterval(reader);
  assert.equal(socket.destroyed, false, `cut off after ${received} bytes`);
});

async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
