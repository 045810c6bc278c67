import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JSON_LIMITS } from '../../src/api/json.js';
import { setup } from '../helpers/setup.js';

const { arrayItems } = JSON_LIMITS;
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const array = (items: number) => `[${Array.from({ length: items }, () => '1').join(',')}]`;

describe('a body beyond the limits', () => {
  it('is 400 40009 on POST and PATCH, before validation', async (t) => {
    const { call } = await setup(t);
    const deep = await call({
      method: 'POST',
      url: '/plants',
      json: `{"name":"x","tag":${nested(40)}}`,
    });
    assert.equal(deep.statusCode, 400);
    assert.deepEqual(JSON.parse(deep.body), {
      error: 40009,
      message: 'The request body is refused: it nests deeper than 16 levels.',
    });
    await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"x"}' });
    const long = await call({
      method: 'PATCH',
      url: '/plants/1',
      json: `{"tag":${array(arrayItems + 1)}}`,
    });
    assert.equal(long.statusCode, 400);
    assert.equal(JSON.parse(long.body).error, 40009);
  });
});
