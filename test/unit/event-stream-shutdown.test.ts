import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { cutStalled, holdsUnsent } from '../../src/http/routes/events.js';

// At shutdown a stream whose client stopped reading is cut off, not waited for. Its text may
// be in its body, or (the stream caught up, its body empty) in the answer's and the socket's
// buffers: the answer's writableLength must see those, on a real socket.

/**
 * An answer on a real connection whose client reads what is written to it (`slowly`: a chunk,
 * then a pause of 2 ms, on and on), or does not.
 */
async function answer(t: test.TestContext, reads: boolean | 'slowly'): Promise<ServerResponse> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.closeAllConnections());
  t.after(() => server.close());
  const { port } = server.address() as { port: number };
  const client = connect(port, '127.0.0.1', () =>
    client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
  );
  t.after(() => client.destroy());
  if (reads === 'slowly') {
    client.on('data', () => {
      client.pause();
      setTimeout(() => client.resume(), 2);
    });
  } else if (reads) client.resume();
  else client.pause();
  const [, response] = (await once(server, 'request')) as [unknown, ServerResponse];
  return response;
}

const emptyBody = () => Readable.from([]);

/** Pushes `mib` MiB of 32 KiB batches (a stream's are up to 100 events, tens of KiB). */
function pushBatches(body: Readable, mib: number): void {
  for (let i = 0; i < mib * 32; i++) body.push(Buffer.alloc(32 << 10, 'x'));
}

/** The largest buffer TCP gives a socket for `way` (the third field of tcp_wmem, tcp_rmem). */
const largestBuffer = (way: 'wmem' | 'rmem') =>
  Number(readFileSync(`/proc/sys/net/ipv4/tcp_${way}`, 'utf8').trim().split(/\s+/)[2]);

test('a stream whose client stopped reading holds unsent text, also with its body empty', async (t) => {
  const stalled = await answer(t, false);
  // More than the kernel's buffers on both sides can ever take, the sender's and the paused
  // client's: what is left stays in the process for as long as the client does not read.
  const mib = Math.ceil((largestBuffer('wmem') + largestBuffer('rmem')) / (1 << 20)) + 1;
  for (let i = 0; i < mib; i++) stalled.write(Buffer.alloc(1 << 20, 'x'));
  assert.ok(stalled.writableLength > 0);
  assert.equal(holdsUnsent({ body: emptyBody(), response: stalled }), true);
});

test('a stream whose client reads, caught up, holds nothing unsent', async (t) => {
  const reading = await answer(t, true);
  if (!reading.write(Buffer.alloc(1 << 20, 'x'))) await once(reading, 'drain');
  assert.equal(holdsUnsent({ body: emptyBody(), response: reading }), false);
  const body = new Readable({ read() {} });
  body.push('id: 7\n\n');
  assert.equal(holdsUnsent({ body, response: reading }), true, 'text still in the body');
});

test(
  'at shutdown, a stream whose client stopped reading is cut off, a late batch too',
  { timeout: 30_000 },
  async (t) => {
    const stalled = await answer(t, false);
    const body = new Readable({ read() {} });
    body.pipe(stalled);
    cutStalled([{ body, response: stalled }], 20); // reading the log: nothing held yet
    assert.equal(stalled.destroyed, false);
    // Batches sent after, more than the kernel takes.
    const mib = Math.ceil((largestBuffer('wmem') + largestBuffer('rmem')) / (1 << 20)) + 1;
    pushBatches(body, mib);
    await once(stalled, 'close');
    assert.equal(stalled.destroyed, true);
  },
);

test(
  'at shutdown, a client still reading a batch larger than the kernel takes gets it all',
  { timeout: 30_000 },
  async (t) => {
    // Slowly: text waits in the process at every look, and the socket takes more between two.
    const reading = await answer(t, 'slowly');
    const body = new Readable({ read() {} });
    body.pipe(reading);
    cutStalled([{ body, response: reading }], 100);
    pushBatches(body, 16);
    body.push(null);
    const ended = await Promise.race([
      once(reading, 'finish').then(() => 'finished'),
      once(reading, 'close').then(() => 'cut off'),
    ]);
    assert.equal(ended, 'finished');
  },
);
