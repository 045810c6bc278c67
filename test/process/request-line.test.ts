import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { cli, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// serve writes request lines itself (src/server/request-line.ts): the line of a real request
// has every field, with the request's values.

test("serve's line of a request has every field, with the request's values", async (t) => {
  const db = join(makeTempDir(t), 'line.db');
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  const server = await startServer(t, ['--db', db]);
  const listed = (await cli(['token', 'list', '--json', '--db', db])).stdout;
  const tokenId = (JSON.parse(listed) as { id: number }).id;
  const res = await fetch(`${server.url}/plants/42`, {
    headers: { authorization: `Bearer ${token}`, 'x-request-id': 'line-"1"' },
  });
  assert.equal(res.status, 404);
  const line = await server.waitForLog((l) => l.msg === 'request' && l.reqId === 'line-"1"');
  assert.deepEqual(
    { ...line, time: undefined, durationMs: undefined, hostname: undefined },
    {
      level: 30,
      time: undefined,
      pid: server.child.pid,
      hostname: undefined,
      reqId: 'line-"1"',
      method: 'GET',
      route: '/plants/:id',
      url: '/plants/42',
      status: 404,
      durationMs: undefined,
      client: '127.0.0.1',
      tokenId,
      msg: 'request',
    },
  );
  assert.equal(typeof line.durationMs, 'number');
  assert.equal(typeof line.time, 'number');
});
