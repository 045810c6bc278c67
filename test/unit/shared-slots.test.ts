import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SharedSlots, TAKE_AGAIN_MS } from '../../src/core/shared-slots.js';

// The slots of the event streams, shared among tokens: free ones go to anyone; once all are
// taken, a token with at least two fewer than the one with the most takes that one's oldest,
// at most once every TAKE_AGAIN_MS. The clock is the test's.

/** Slots of `size` on a clock the test moves (`clock.ms`); `counted.last`, what they told. */
function sharedSlots<Holder>(size: number) {
  const clock = { ms: 0 };
  const counted = { last: 0 };
  const slots = new SharedSlots<Holder>(
    size,
    () => clock.ms,
    (taken) => (counted.last = taken),
  );
  return { slots, clock, counted };
}

test('one holder alone takes every slot, and is refused past them', () => {
  const { slots } = sharedSlots<string>(3);
  for (let i = 0; i < 3; i += 1) assert.ok(slots.take('a', () => assert.fail('not ended')));
  assert.equal(
    slots.take('a', () => undefined),
    undefined,
  );
  assert.equal(slots.inUse, 3);
});

test('another holder takes the oldest slots of the largest, down to an equal share', () => {
  const { slots, clock } = sharedSlots<string>(4);
  const ended: number[] = [];
  for (let i = 0; i < 4; i += 1) slots.take('a', () => ended.push(i));
  assert.ok(slots.take('b', () => undefined));
  assert.deepEqual(ended, [0], "the largest holder's oldest ends");
  assert.equal(
    slots.take('b', () => undefined),
    undefined,
    'not again at once',
  );
  clock.ms += TAKE_AGAIN_MS - 1;
  assert.equal(
    slots.take('b', () => undefined),
    undefined,
    'nor just before TAKE_AGAIN_MS',
  );
  clock.ms += 1;
  assert.ok(slots.take('b', () => undefined));
  assert.deepEqual(ended, [0, 1]);
  assert.equal(
    slots.take('b', () => undefined),
    undefined,
    'two each: b is refused',
  );
  assert.equal(
    slots.take('a', () => undefined),
    undefined,
    'and so is a',
  );
  assert.equal(slots.inUse, 4);
});

test('a slot taken away is let go already: its release frees nothing more', () => {
  const { slots } = sharedSlots<string>(2);
  const releases = [slots.take('a', () => undefined)!, slots.take('a', () => undefined)!];
  slots.take('b', () => undefined);
  releases[0]!();
  releases[0]!();
  assert.equal(slots.inUse, 2, "the slot was b's already");
  releases[1]!();
  releases[1]!();
  assert.equal(slots.inUse, 1);
});

interface Held {
  holder: number;
  release: () => void;
  ended: boolean;
}

test('whatever the takes and releases: within the size, fair, and no slot taken needlessly', () => {
  const step = fc.oneof(
    fc.record({ take: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ release: fc.nat() }),
    fc.record({ wait: fc.integer({ min: 0, max: 2 * TAKE_AGAIN_MS }) }),
  );
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.array(step, { maxLength: 60 }),
      (size, steps) => {
        const { slots, clock, counted } = sharedSlots<number>(size);
        // The slots held, oldest first, as the test counts them, and when each holder last
        // took one from another.
        let live: Held[] = [];
        const tookAt = new Map<number, number>();
        const count = (holder: number) => live.filter((slot) => slot.holder === holder).length;
        const waiting = (holder: number) =>
          clock.ms - (tookAt.get(holder) ?? -Infinity) < TAKE_AGAIN_MS;
        for (const action of steps) {
          if ('wait' in action) {
            clock.ms += action.wait;
          } else if ('release' in action) {
            if (live.length > 0) live.splice(action.release % live.length, 1)[0]!.release();
          } else {
            const holder = action.take;
            const entry: Held = { holder, release: () => undefined, ended: false };
            const release = slots.take(holder, () => (entry.ended = true));
            const ended = live.filter((slot) => slot.ended);
            assert.ok(ended.length <= 1, 'one slot taken away at most');
            if (release === undefined) {
              assert.equal(live.length, size, 'refused only when every slot is taken');
              const fair = live.every((other) => count(other.holder) <= count(holder) + 1);
              assert.ok(fair || waiting(holder), 'refused at a fair share, or too soon');
            } else {
              const victim = ended[0];
              if (victim !== undefined) {
                assert.ok(!waiting(holder), 'not again within TAKE_AGAIN_MS');
                tookAt.set(holder, clock.ms);
                assert.ok(count(victim.holder) >= count(holder) + 2, 'taken from two more only');
                assert.ok(live.every((slot) => count(slot.holder) <= count(victim.holder)));
                const oldest = live.find((slot) => slot.holder === victim.holder);
                assert.equal(oldest, victim, 'its oldest');
                live = live.filter((slot) => slot !== victim);
              }
              entry.release = release;
              live.push(entry);
            }
          }
          assert.equal(slots.inUse, live.length);
          assert.equal(counted.last, live.length, 'told each change');
          assert.ok(live.length <= size);
        }
      },
    ),
  );
});
