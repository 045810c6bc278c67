import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SharedSlots } from '../../src/core/shared-slots.js';

// The slots of the event streams, shared among tokens: free ones go to anyone; once all are
// taken, a token with at least two fewer than the one with the most takes that one's oldest.

test('one holder alone takes every slot, and is refused past them', () => {
  const slots = new SharedSlots<string>(3);
  for (let i = 0; i < 3; i += 1) assert.ok(slots.take('a', () => assert.fail('not ended')));
  assert.equal(
    slots.take('a', () => undefined),
    undefined,
  );
  assert.equal(slots.inUse, 3);
});

test('another holder takes the oldest slots of the largest, down to an equal share', () => {
  const slots = new SharedSlots<string>(4);
  const ended: number[] = [];
  for (let i = 0; i < 4; i += 1) slots.take('a', () => ended.push(i));
  assert.ok(slots.take('b', () => undefined));
  assert.deepEqual(ended, [0], "the largest holder's oldest ends");
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
  const slots = new SharedSlots<string>(2);
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
  );
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.array(step, { maxLength: 60 }),
      (size, steps) => {
        const slots = new SharedSlots<number>(size);
        // The slots held, oldest first, as the test counts them.
        let live: Held[] = [];
        const count = (holder: number) => live.filter((slot) => slot.holder === holder).length;
        for (const action of steps) {
          if ('release' in action) {
            if (live.length > 0) live.splice(action.release % live.length, 1)[0]!.release();
          } else {
            const holder = action.take;
            const entry: Held = { holder, release: () => undefined, ended: false };
            const release = slots.take(holder, () => (entry.ended = true));
            const ended = live.filter((slot) => slot.ended);
            assert.ok(ended.length <= 1, 'one slot taken away at most');
            if (release === undefined) {
              assert.equal(live.length, size, 'refused only when every slot is taken');
              for (const other of live) {
                assert.ok(count(other.holder) <= count(holder) + 1, 'refused at a fair share');
              }
            } else {
              const victim = ended[0];
              if (victim !== undefined) {
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
          assert.ok(live.length <= size);
        }
      },
    ),
  );
});
