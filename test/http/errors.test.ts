import assert from 'node:assert/strict';
import { test } from 'node:test';
import { composeApp } from '../../src/server/compose.js';
import { body, setup } from '../helpers/setup.js';

test('an unexpected failure is a 500 Error body that reveals nothing internal', async (t) => {
  const { store, token } = await setup(t);
  const failing = {
    ...store,
    plants: {
      ...store.plants,
      get: async () => {
        throw new Error('SQLITE_CORRUPT: database disk image is malformed at /srv/secret.db');
      },
    },
  };
  const app = composeApp({ store: failing });
  t.after(() => app.close());
  const res = await app.inject({
    method: 'GET',
    url: '/plants/1',
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(res.statusCode, 500);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.deepEqual(body(res), { error: 50001n, message: 'An unexpected error occurred.' });
  assert.doesNotMatch(res.body, /SQLITE|secret|stack|at /);
});

test('an error body always has both fields, and its code names the status', async (t) => {
  const { call } = await setup(t);
  const answers = await Promise.all([
    call({ method: 'GET', url: '/plants/1' }),
    call({ method: 'GET', url: '/plants/1', token: null }),
    call({ method: 'GET', url: '/plants/x' }),
    call({ method: 'PUT', url: '/plants' }),
    call({ method: 'GET', url: '/elsewhere' }),
  ]);
  for (const res of answers) {
    const { error, message } = body<{ error: bigint; message: string }>(res);
    assert.equal(typeof error, 'bigint');
    assert.ok(error >= -(2n ** 31n) && error < 2n ** 31n, 'error is an int32');
    assert.equal(typeof message, 'string');
    assert.ok(message.length > 0);
    assert.equal(Math.trunc(Number(error) / 100), res.statusCode);
  }
  assert.deepEqual(
    answers.map((res) => res.statusCode),
    [404, 401, 400, 405, 404],
  );
});
