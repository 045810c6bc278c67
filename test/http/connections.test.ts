import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { composeApp } from '../../src/server/compose.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { makeTempDir } from '../helpers/setup.js';

// The cap on open connections: at the cap a new connection takes the place of the one idle
// longest, so that connections opened and left idle cannot lock other clients out (with none
// idle, see the address tests in connection-guard.test.ts).

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => resolve(socket));
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
