import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { SQLITE } from '../helpers/backends.js';
import { body, setup } from '../helpers/setup.js';

// A SQLite database another process holds a write lock on: writes are refused at once with a
// 503 the client may retry, reads and readiness go on, and writes succeed once it lets go.

test(
  'a database locked by another process answers writes 503 quickly; reads go on',
  { skip: SQLITE.skip },
  async (t) => {
    const { call, file } = await setup(t);
    await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"x"}' });
    const other = new Database(file);
    t.after(() => other.close());
    other.exec('BEGIN IMMEDIATE');
    const started = Date.now();
    const locked = await call({ method: 'POST', url: '/plants', json: '{"id":2,"name":"y"}' });
    assert.ok(Date.now() - started < 2_000, 'no long stall of the event loop');
    assert.equal(locked.statusCode, 503);
    assert.equal(locked.headers['retry-after'], '1');
    assert.equal(body<{ error: bigint }>(locked).error, 50301n);
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 200);
    assert.equal((await call({ method: 'GET', url: '/readyz' })).statusCode, 200);
    other.exec('COMMIT');
    const after = await call({ method: 'POST', url: '/plants', json: '{"id":2,"name":"y"}' });
    assert.equal(after.statusCode, 201);
  },
);
