import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fairLevel,
  FIRST_WINDOW,
  heldAtMost,
  LONGEST_PAUSE_MS,
  nextWindow,
  pauseAfter,
} from '../../src/core/webhooks/fair-share.js';

// How a process shares its delivery slots among endpoints (see fair-share.ts): a window per
// endpoint that grows while it delivers and falls to 1 when it fails, cut to a max-min fair
// share of the slots.
describe('webhook fair share', () => {
  it('starts a window at 1, doubles it by deliveries while messages press, up to the bound', () => {
    assert.equal(FIRST_WINDOW, 1);
    assert.equal(nextWindow(1, true, true, 16), 2);
    assert.equal(nextWindow(5, true, true, 16), 10);
    assert.equal(nextWindow(10, true, true, 16), 16);
    assert.equal(nextWindow(5, true, false, 16), 5, 'an endpoint that keeps up needs no more');
    assert.equal(nextWindow(16, true, true, 16), 16);
  });

  it('sets a window back to 1 after any failure', () => {
    assert.equal(nextWindow(16, false, true, 16), 1);
    assert.equal(nextWindow(1, false, false, 16), 1);
  });

  it('cuts only the windows above an equal share; the rest goes to those', () => {
    assert.equal(fairLevel([], 64), Infinity);
    assert.equal(fairLevel([16, 16, 16, 16], 64), Infinity, 'they fit');
    assert.equal(fairLevel([16, 16, 16, 16, 16], 64), 12);
    // 20 hung endpoints at 1 each leave 44 slots: a healthy endpoint keeps its 16.
    assert.equal(fairLevel([...Array<number>(20).fill(1), 16], 64), Infinity);
    assert.equal(fairLevel([...Array<number>(20).fill(1), 16, 16, 16, 16], 64), 11);
    assert.equal(fairLevel([2, 16, 16], 10), 4);
  });

  it('never shares below 1: each endpoint has its one attempt, however many there are', () => {
    assert.equal(fairLevel(Array<number>(100).fill(2), 64), 1);
  });

  it('holds one message at a limit of 1, twice the limit above', () => {
    assert.equal(heldAtMost(1), 1);
    assert.equal(heldAtMost(2), 4);
    assert.equal(heldAtMost(16), 32);
  });

  it('pauses a failing endpoint 250 ms, doubling with each failure in a row, up to a minute', () => {
    assert.equal(pauseAfter(0, 0), 0, 'no pause before a failure');
    assert.deepEqual(
      [1, 2, 3, 4, 8, 9, 10, 1000].map((failures) => pauseAfter(failures, 0)),
      [250, 500, 1000, 2000, 32_000, LONGEST_PAUSE_MS, LONGEST_PAUSE_MS, LONGEST_PAUSE_MS],
    );
    // Jitter takes up to half off, so that endpoints failing together spread their retries.
    assert.equal(pauseAfter(1, 0.5), 188);
    assert.ok(pauseAfter(9, 0.999_999) >= LONGEST_PAUSE_MS / 2);
  });
});
