import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { earliestDue, NEXT_DUE_WINDOW } from '../../src/store/webhook-rows.js';

// The next due time after a claim from a window of the earliest pending messages (see
// webhook-rows.ts): never later than the true one for what the window or the probe past it
// sees, so that the dispatcher never oversleeps a due message.
describe('earliestDue', () => {
  const at = (ms: number) => new Date(ms);

  it('is the earliest due time in a window that holds every pending message', () => {
    assert.deepEqual(earliestDue(at(500), 3, at(900)), at(500));
    assert.equal(earliestDue(null, 0, null), null);
    assert.equal(earliestDue(null, 2, at(900)), null, 'pending only for disabled endpoints');
  });

  it('is no later than the earliest next attempt past the claim when the window is full', () => {
    assert.deepEqual(earliestDue(at(5000), NEXT_DUE_WINDOW, at(900)), at(900));
    assert.deepEqual(earliestDue(at(500), NEXT_DUE_WINDOW, at(900)), at(500));
    // A window of messages all due by the claim: what lies past it.
    assert.deepEqual(earliestDue(null, NEXT_DUE_WINDOW, at(900)), at(900));
    assert.equal(earliestDue(null, NEXT_DUE_WINDOW, null), null);
  });
});
