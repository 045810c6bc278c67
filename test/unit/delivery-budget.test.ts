import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DeliveryBudget } from '../../src/service/delivery-budget.js';

// The budget against a clock and an event loop whose use the test sets, window by window.
function budget(floor = 10) {
  const state = { at: 0, used: 0 };
  const made = new DeliveryBudget({
    utilization: () => state.used,
    now: () => state.at,
    windowMs: 100,
    busy: 0.9,
    floor,
  });
  /** Ends the window with the loop at `used`, and counts what the next lets begin (up to 1,000). */
  const next = (used: number): number => {
    state.used = used;
    state.at += 100;
    let n = 0;
    while (n < 1000 && made.take()) n++;
    return n;
  };
  return { made, state, next };
}

describe('DeliveryBudget', () => {
  it('lets attempts begin freely while the event loop has time to spare', () => {
    const { next } = budget();
    assert.deepEqual([next(0.2), next(0.85), next(0.5)], [1000, 1000, 1000]);
  });

  it('halves what begins while the loop is full, down to its floor, and lifts it after', () => {
    const { made, state, next } = budget(10);
    state.at = 100;
    for (let i = 0; i < 160; i++) assert.ok(made.take());
    // 160 began in a window that filled the loop: then 80, 40, 20, 10, and 10 however long.
    assert.deepEqual(
      [next(0.95), next(0.95), next(0.95), next(0.95), next(0.95), next(1)],
      [80, 40, 20, 10, 10, 10],
    );
    // Asking whether there is room takes none.
    assert.equal(made.room(), false);
    state.used = 0.95;
    state.at += 100;
    assert.equal(made.room(), true);
    assert.equal(made.room(), true);
    let taken = 0;
    while (made.take()) taken++;
    assert.equal(taken, 10);
    // A window under `busy` doubles it; a second lifts it.
    assert.deepEqual([next(0.5), next(0.5)], [20, 1000]);
    // A full window after a calm one starts over from what the calm one began.
    assert.equal(next(0.95), 500);
  });

  it('calls back once the next window begins, once however often asked', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { made, state, next } = budget(1);
    next(1);
    next(1);
    assert.equal(made.take(), false);
    let calls = 0;
    made.later(() => (calls += 1));
    made.later(() => (calls += 1));
    state.at += 99;
    t.mock.timers.tick(99);
    assert.equal(calls, 0);
    t.mock.timers.tick(1);
    assert.equal(calls, 1);
    made.later(() => (calls += 1));
    made.cancel();
    t.mock.timers.tick(200);
    assert.equal(calls, 1);
  });
});
