import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../../src/core/errors.js';

// An ApiError is an answer: it carries no stack (capturing one cost more than the rest of a
// refusal), and making one leaves the stacks of other errors as they were.

test('an ApiError has no stack frames, and other errors keep theirs', () => {
  const limit = Error.stackTraceLimit;
  const refusal = new ApiError('plantNotFound', 'No plant has id 1.');
  assert.equal(refusal.message, 'No plant has id 1.');
  assert.equal(refusal.status, 404);
  assert.ok(refusal instanceof Error);
  assert.doesNotMatch(refusal.stack ?? '', /\n\s+at /);
  assert.equal(Error.stackTraceLimit, limit);
  assert.match(new Error('bug').stack ?? '', /\n\s+at /);
});
