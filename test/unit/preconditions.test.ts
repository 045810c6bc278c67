import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../../src/core/errors.js';
import { parseIfMatch } from '../../src/api/preconditions.js';

test('parseIfMatch reads RFC 9110 entity-tag lists', () => {
  assert.equal(parseIfMatch(undefined), undefined);
  assert.deepEqual(parseIfMatch(' * '), { any: true });
  assert.deepEqual(parseIfMatch('"a,b" ,\tW/"c", ""'), {
    any: false,
    tags: ['"a,b"', 'W/"c"', '""'],
  });
  // RFC 9110 §5.6.1: a recipient accepts empty list elements.
  assert.deepEqual(parseIfMatch('"a",'), { any: false, tags: ['"a"'] });
  assert.deepEqual(parseIfMatch(['"a"', '"b"']), { any: false, tags: ['"a"', '"b"'] });
  assert.throws(() => parseIfMatch(''), ApiError);
  assert.throws(() => parseIfMatch('"a"x'), ApiError);
});
