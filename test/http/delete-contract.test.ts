import assert from 'node:assert/strict';
import { test } from 'node:test';
import { body, forEachBackend } from '../helpers/setup.js';

// The contract's one operation, rule by rule (docs/decisions.md §1-3).

forEachBackend(({ setup }) => {
  test('DELETE of an existing plant answers 204 with no body, and the plant is gone', async (t) => {
    const { call } = await setup(t);
    await call({ method: 'POST', url: '/plants', json: '{"id":7,"name":"Fern"}' });
    const res = await call({ method: 'DELETE', url: '/plants/7' });
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    assert.equal(res.headers['content-type'], undefined);
    const again = await call({ method: 'GET', url: '/plants/7' });
    assert.equal(again.statusCode, 404);
  });

  test('DELETE of the largest and smallest int64 ids keeps every digit', async (t) => {
    const { call } = await setup(t);
    for (const id of ['9223372036854775807', '-9223372036854775808']) {
      const created = await call({
        method: 'POST',
        url: '/plants',
        json: `{"id":${id},"name":"x"}`,
      });
      assert.equal(created.statusCode, 201);
      assert.equal(created.headers.location, `/plants/${id}`);
      assert.match(created.body, new RegExp(`"id":${id}[,}]`));
      assert.equal((await call({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
    }
  });

  test('DELETE with a malformed id answers 400 with the Error body', async (t) => {
    const { call } = await setup(t);
    for (const id of [
      'abc',
      '1.5',
      '9223372036854775808',
      '-9223372036854775809',
      '+1',
      '01',
      '-0',
      '1e3',
      '%20',
    ]) {
      const res = await call({ method: 'DELETE', url: `/plants/${id}` });
      assert.equal(res.statusCode, 400, id);
      assert.deepEqual(Object.keys(body(res) as object).sort(), ['error', 'message']);
      assert.equal(body<{ error: bigint }>(res).error, 40001n);
    }
  });

  test('DELETE of an unknown plant answers 404 plant not found', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'DELETE', url: '/plants/12' });
    assert.equal(res.statusCode, 404);
    assert.equal(body<{ error: bigint }>(res).error, 40401n);
  });

  test('DELETE takes no query parameters and no body', async (t) => {
    const { call } = await setup(t);
    await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"x"}' });
    const query = await call({ method: 'DELETE', url: '/plants/1?force=true' });
    assert.equal(query.statusCode, 400);
    assert.equal(body<{ error: bigint }>(query).error, 40002n);
    const withBody = await call({ method: 'DELETE', url: '/plants/1', json: '{}' });
    assert.equal(withBody.statusCode, 400);
    assert.equal(body<{ error: bigint }>(withBody).error, 40005n);
    assert.equal((await call({ method: 'DELETE', url: '/plants/1' })).statusCode, 204);
  });
});
