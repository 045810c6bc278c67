import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { Readable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { ConnectionGuard } from '../../src/http/connections.js';
import { beyondTheKernel } from '../helpers/tcp-buffers.js';

// At shutdown the connection guard's send timeout drops to about a second: an answer whose
// client stopped reading (an event stream above all) is cut off, not waited for through the
// grace; one whose client still takes bytes, however slowly, is sent to the end; one not yet
// answered (a long poll) is left alone. On real sockets: what counts is what the kernel took.

type Reads = boolean | 'slowly';

/**
 * A guarded server on a real connection whose client reads what is written to it
 * (`slowly`: a chunk, then a pause of 2 ms, on and on), or does not. Resolves with the
 * guard and the answer being made to each client, in the order of `clients`.
 */
async function guarded(
  t: TestContext,
  clients: Reads[],
  now?: () => number,
): Promise<{ guard: ConnectionGuard; responses: ServerResponse[] }> {
  const guard = new ConnectionGuard({ inFlight: 8, pipelined: 64, sendTimeoutMs: 60_000 }, now);
  const responses: ServerResponse[] = [];
  const arrived: (() => void)[] = [];
  const server = guard.createServer(
    (request, response) => {
      responses[Number(request.url!.slice(1))] = response;
      arrived.shift()?.();
    },
    { keepAliveTimeout: 60_000 },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  for (const [i, reads] of clients.entries()) {
    const request = new Promise<void>((resolve) => arrived.push(resolve));
    const client = connect(port, '127.0.0.1', () =>
      client.write(`GET /${i} HTTP/1.1\r\nHost: x\r\n\r\n`),
    );
    client.on('error', () => undefined);
    t.after(() => client.destroy());
    if (reads === 'slowly') {
      client.on('data', () => {
        client.pause();
        setTimeout(() => client.resume(), 2);
      });
    } else if (reads) client.resume();
    else client.pause();
    await request;
  }
  return { guard, responses };
}

/** Pushes `mib` MiB of 32 KiB batches (an event stream's are up to 100 events, tens of KiB). */
function pushBatches(body: Readable, mib: number): void {
  for (let i = 0; i < mib * 32; i++) body.push(Buffer.alloc(32 << 10, 'x'));
}

/** Resolves once `condition` holds, checking on every turn of the event loop. */
async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test(
  'closing: a stream whose client stopped reading is cut off, by a batch sent after too',
  { timeout: 30_000 },
  async (t) => {
    const { guard, responses } = await guarded(t, [false]);
    const stalled = responses[0]!;
    const body = new Readable({ read() {} });
    body.pipe(stalled);
    // As a stream reading the log when the shutdown begins: nothing held yet.
    guard.closing(40);
    assert.equal(stalled.destroyed, false);
    pushBatches(body, beyondTheKernel());
    await once(stalled, 'close');
    assert.equal(stalled.writableFinished, false, 'cut off before its end');
  },
);

test(
  'closing: a client still reading, slowly, more than the kernel takes gets it all',
  { timeout: 30_000 },
  async (t) => {
    // Slowly: text waits in the process at every look, and the socket takes more between two.
    const { guard, responses } = await guarded(t, ['slowly']);
    const reading = responses[0]!;
    const body = new Readable({ read() {} });
    body.pipe(reading);
    guard.closing(500);
    pushBatches(body, 16);
    body.push(null);
    const ended = await Promise.race([
      once(reading, 'finish').then(() => 'finished'),
      once(reading, 'close').then(() => 'cut off'),
    ]);
    assert.equal(ended, 'finished');
  },
);

test('closing: an answer not begun, or fully taken, is left alone; a stalled one is not', async (t) => {
  // A clock 10 s on at each look: any answer that held text without progress between two
  // looks is past any send timeout at the second.
  let looks = 0;
  const now = () => ++looks * 10_000;
  const { guard, responses } = await guarded(t, [false, true, false], now);
  const [waiting, taken, stalled] = responses as [ServerResponse, ServerResponse, ServerResponse];
  // A long poll: nothing written yet. An answer its client took. One it stopped reading.
  taken.write('{"all":"taken"}');
  for (let i = 0; i < beyondTheKernel(); i++) stalled.write(Buffer.alloc(1 << 20, 'x'));
  const before = looks;
  guard.closing(40);
  await until(() => stalled.destroyed, 'the stalled answer cut off');
  await until(() => looks >= before + 4, 'two looks more');
  assert.equal(waiting.destroyed, false, 'an answer not begun is left alone');
  assert.equal(taken.destroyed, false, 'an answer taken is left alone');
  waiting.end('{}');
  await once(waiting, 'finish');
});

test('closing: an answer ended but still being sent reaches its client; idle connections close', async (t) => {
  const body = Buffer.alloc(beyondTheKernel() << 20, 'x');
  const guard = new ConnectionGuard({ inFlight: 8, pipelined: 64, sendTimeoutMs: 60_000 });
  const server = guard.createServer(
    (_request, response) => {
      response.setHeader('content-length', body.length);
      response.end(body);
    },
    { keepAliveTimeout: 60_000 },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.closeAllConnections());
  const { port } = server.address() as AddressInfo;
  const client = (reads: Reads) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    t.after(() => socket.destroy());
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (reads === 'slowly') {
        socket.pause();
        setTimeout(() => socket.resume(), 2);
      }
    });
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    return { socket, received: () => received };
  };
  // One client takes its whole answer and stays connected, idle; another reads slowly.
  const idle = client(true);
  await until(() => idle.received() > body.length, 'the first answer');
  const slow = client('slowly');
  await until(() => slow.received() > 0, 'the second answer begun');
  const closed = once(server, 'close');
  server.close();
  await once(idle.socket, 'close');
  assert.ok(slow.received() < body.length, 'the answer was still being sent at the close');
  await once(slow.socket, 'close');
  assert.ok(slow.received() > body.length, `${slow.received()} bytes of ${body.length} and more`);
  await closed;
});
