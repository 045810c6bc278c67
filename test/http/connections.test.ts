import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { unansweredRequests } from '../../src/http/connections.js';
import { composeApp } from '../../src/server/compose.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { makeTempDir } from '../helpers/setup.js';
import { until } from '../helpers/until.js';

// The cap on open connections: at the cap a new connection takes the place of the one idle
// longest, so that connections opened and left idle cannot lock other clients out (with none
// idle, see the address tests in connection-guard.test.ts).

function open(port: number, from = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(socket));
    socket.on('error', reject);
  });
}

/** The answer to a keep-alive GET /healthz, or 'closed' if the server hung up instead. */
function health(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('{"status":"ok"}')) {
        socket.off('data', onData);
        resolve(text.split('\r\n')[0]!);
      }
    };
    socket.on('data', onData);
    socket.once('close', () => resolve(text === '' ? 'closed' : text));
    socket.on('error', () => undefined);
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  });
}

test('at --max-connections a new connection takes the place of the one idle longest', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'c.db') });
  const app = composeApp({ store, maxConnections: 2 });
  await app.listen({ port: 0, host: '127.0.0.1' });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  const { port } = app.server.address() as AddressInfo;
  const first = await open(port);
  const second = await open(port);
  t.after(() => {
    first.destroy();
    second.destroy();
  });
  assert.equal(await health(first), 'HTTP/1.1 200 OK');
  assert.equal(await health(second), 'HTTP/1.1 200 OK');
  // Both idle now, the first the longer: it makes room.
  const firstClosed = once(first, 'close');
  const third = await open(port);
  t.after(() => third.destroy());
  assert.equal(await health(third), 'HTTP/1.1 200 OK');
  await firstClosed;
  assert.equal(await health(second), 'HTTP/1.1 200 OK', 'the other idle one is kept');
});

test('at --max-connections, a client reading none of its answers locks no other address out', async (t) => {
  // The attack, with no token: every connection asks for the OpenAPI document (about 190 KB)
  // 60 times in one burst and reads nothing, more than the kernel's buffers take; each
  // connection would be held until the send timeout, and opened again.
  let clock = Date.now();
  const store = openSqliteStore({ file: join(makeTempDir(t), 'c.db') });
  const app = composeApp({ store, maxConnections: 3, now: () => clock });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const hog: Socket[] = [];
  t.after(async () => {
    hog.forEach((socket) => socket.destroy());
    await app.close();
    await store.close();
  });
  const { port } = app.server.address() as AddressInfo;
  for (let i = 0; i < 3; i++) {
    const before = unansweredRequests(app.server);
    const socket = await open(port);
    hog.push(socket);
    socket.pause();
    socket.write('GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(60));
    await until(() => unansweredRequests(app.server) > before, 'its requests being answered');
  }
  // Another address: refused while the hog's answers have not stalled for long, then served,
  // long before the send timeout (30 s) would free a connection. The clock moves a second at
  // each refusal; the guard's sweeps (a real second apart) see it.
  const start = clock;
  for (let knocks = 0; ; knocks++) {
    assert.ok(clock - start <= 10_000, 'the other address served within 10 s');
    const other = await open(port, '127.0.0.2');
    const answer = await health(other);
    other.destroy();
    if (answer === 'HTTP/1.1 200 OK') {
      assert.ok(knocks > 0, 'refused while no answer had stalled');
      break;
    }
    assert.equal(answer, 'closed');
    clock += 1_000;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
});
