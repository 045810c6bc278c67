import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseList } from 'structured-headers';
import { addressKey } from '../../src/core/address-key.js';
import {
  formatRateLimit,
  parseRateLimit,
  secondsLeft,
  windowStart,
} from '../../src/core/rate-limit.js';
import { WindowCounts } from '../../src/core/window-counts.js';
import { limitField, policyField } from '../../src/api/rate-limit-fields.js';

// The pure parts of rate limiting: parsing limits, fixed windows, counting and deciding,
// the shared-count bookkeeping, address keys, and the two header fields.

const POLICY = { name: 'token', quota: 3, windowSeconds: 60 };
/** 2024-01-01T00:00:00Z, a whole minute. */
const T0 = Date.UTC(2024, 0, 1);

describe('parseRateLimit', () => {
  it('reads requests/window with s, m, h and d', () => {
    assert.deepEqual(parseRateLimit('100/60s'), { quota: 100, windowSeconds: 60 });
    assert.deepEqual(parseRateLimit('100000/1m'), { quota: 100_000, windowSeconds: 60 });
    assert.deepEqual(parseRateLimit('5000/1h'), { quota: 5000, windowSeconds: 3600 });
    assert.deepEqual(parseRateLimit('1/1d'), { quota: 1, windowSeconds: 86_400 });
    assert.deepEqual(parseRateLimit('1000000000/1s'), { quota: 1e9, windowSeconds: 1 });
  });

  it('reads off as null', () => {
    assert.equal(parseRateLimit('off'), null);
  });

  for (const text of [
    '',
    '100',
    '100/',
    '/60s',
    '0/60s',
    '100/0s',
    '100/60',
    '-1/60s',
    '1.5/60s',
  ]) {
    it(`refuses ${JSON.stringify(text)} with a usable message`, () => {
      assert.throws(() => parseRateLimit(text), /not a rate limit; use requests\/window/);
    });
  }

  it('refuses quotas above 10^9 and windows above a day', () => {
    assert.throws(() => parseRateLimit('1000000001/60s'), /at most 1000000000 requests/);
    assert.throws(() => parseRateLimit('1/25h'), /at most 1d/);
  });

  it('formats what it parses', () => {
    assert.equal(formatRateLimit(parseRateLimit('100/1m')), '100/60s');
    assert.equal(formatRateLimit(null), 'off');
  });
});

describe('fixed windows', () => {
  it('are aligned to the epoch', () => {
    assert.equal(windowStart(T0, 60), T0 / 1000);
    assert.equal(windowStart(T0 + 59_999, 60), T0 / 1000);
    assert.equal(windowStart(T0 + 60_000, 60), T0 / 1000 + 60);
    assert.equal(windowStart(T0 + 7_000, 5), T0 / 1000 + 5);
  });

  it('count down whole seconds to their end, rounded up, never 0', () => {
    assert.equal(secondsLeft(T0, 60), 60);
    assert.equal(secondsLeft(T0 + 1, 60), 60);
    assert.equal(secondsLeft(T0 + 1_000, 60), 59);
    assert.equal(secondsLeft(T0 + 59_001, 60), 1);
    assert.equal(secondsLeft(T0 + 59_999, 60), 1);
  });
});

describe('WindowCounts', () => {
  it('admits the quota, then refuses without counting the refusals', () => {
    const counts = new WindowCounts<number>(POLICY);
    assert.deepEqual(
      [1, 2, 3, 4, 5].map(() => counts.take(7, T0)),
      [2, 1, 0, -1, -1],
    );
    assert.equal(counts.remaining(7, T0), 0);
  });

  it('counts each key apart', () => {
    const counts = new WindowCounts<number>(POLICY);
    for (let i = 0; i < 3; i++) counts.take(1, T0);
    assert.equal(counts.take(1, T0), -1);
    assert.equal(counts.take(2, T0), 2);
  });

  it('starts afresh in the next window', () => {
    const counts = new WindowCounts<number>(POLICY);
    for (let i = 0; i < 3; i++) counts.take(1, T0 + 30_000);
    assert.equal(counts.take(1, T0 + 59_999), -1);
    assert.equal(counts.take(1, T0 + 60_000), 2);
  });

  it('add counts past the quota; remaining reads without counting', () => {
    const counts = new WindowCounts<string>(POLICY);
    assert.equal(counts.remaining('a', T0), 3);
    assert.equal(counts.size, 0, 'remaining tracks nothing');
    assert.deepEqual(
      [1, 2, 3, 4].map(() => counts.add('a', T0)),
      [2, 1, 0, 0],
    );
    assert.equal(counts.remaining('a', T0), 0);
    assert.equal(counts.remaining('a', T0 + 60_000), 3);
  });

  it('forgets the oldest key beyond its capacity', () => {
    const counts = new WindowCounts<number>(POLICY, 2);
    counts.take(1, T0);
    counts.take(2, T0);
    counts.take(3, T0);
    assert.equal(counts.size, 2);
    assert.equal(counts.remaining(1, T0), 3);
    assert.equal(counts.remaining(3, T0), 2);
  });

  it('beyond its capacity, keeps a key that has used up its quota: new keys do not clear it', () => {
    const counts = new WindowCounts<number>(POLICY, 4);
    for (let i = 0; i < 3; i++) counts.take(1, T0);
    assert.equal(counts.take(1, T0), -1);
    // A client flooding the map with new keys (addresses) to push its own count out.
    for (let key = 100; key < 200; key++) counts.take(key, T0);
    assert.equal(counts.take(1, T0), -1);
    assert.equal(counts.remaining(1, T0), 0);
    assert.ok(counts.size <= 4, `${counts.size}`);
    // In the next window it is a key like any other.
    for (let key = 200; key < 300; key++) counts.take(key, T0 + 60_000);
    assert.equal(counts.remaining(1, T0 + 60_000), 3);
  });

  it('full of keys that may not be forgotten, counts new keys in one shared count: it never grows', () => {
    // A small quota and a flood of new addresses, each using it up (--auth-failure-limit 1/1d
    // behind a proxy that passes any X-Forwarded-For): each would otherwise stay a day.
    const counts = new WindowCounts<number>({ ...POLICY, quota: 2 }, 4);
    for (let key = 1; key <= 4; key++) {
      counts.take(key, T0);
      counts.take(key, T0);
    }
    assert.equal(counts.take(100, T0), 1, 'the shared count takes the first new key');
    assert.equal(counts.take(101, T0), 0);
    assert.equal(counts.take(102, T0), -1, 'and runs out for every other');
    assert.equal(counts.remaining(103, T0), 0);
    for (let key = 200; key < 10_000; key++) assert.equal(counts.take(key, T0), -1);
    assert.equal(counts.size, 4);
    // The keys it holds still count as their own, and were not cleared by the flood.
    assert.equal(counts.take(1, T0), -1);
    // The shared count is used up: a new key cannot even hold a slot in it.
    assert.equal(counts.reserve(300, T0 + 30_000), undefined);
    // In the next window, new keys find room again and the shared count starts over.
    assert.equal(counts.take(500, T0 + 60_000), 1);
    assert.equal(counts.take(1, T0 + 60_000), 1);
  });

  it('after a sync round, looks again at keys it passed over while they were kept', () => {
    // Keys passed over while their lookups were in flight are forgettable once released:
    // eviction must come back to them, not take the newest key again and again (which
    // would let two addresses take turns past the limit).
    const counts = new WindowCounts<string>(POLICY, 4);
    const held = ['a', 'b', 'c'].map((key) => counts.reserve(key, T0)!);
    counts.add('d', T0);
    counts.add('e', T0);
    for (const reservation of held) counts.release(reservation);
    counts.prune(T0);
    let refused = 0;
    for (let i = 0; i < 100; i++) {
      for (const key of ['x', 'y']) {
        const slot = counts.reserve(key, T0);
        if (slot === undefined) refused += 1;
        else counts.confirm(slot, T0);
      }
    }
    assert.equal(refused, 200 - 2 * POLICY.quota);
    assert.equal(counts.size, 4);
  });

  it('a reservation in the shared count is released and confirmed there', () => {
    const counts = new WindowCounts<number>({ ...POLICY, quota: 2 }, 2);
    for (const key of [1, 2]) {
      counts.take(key, T0);
      counts.take(key, T0);
    }
    const held = counts.reserve(100, T0)!;
    assert.equal(held.overflow, true);
    assert.equal(counts.remaining(101, T0), 1);
    counts.release(held);
    assert.equal(counts.remaining(101, T0), 2);
    const again = counts.reserve(101, T0)!;
    assert.equal(counts.confirm(again, T0), 1);
    assert.equal(counts.size, 2);
    assert.deepEqual(
      counts.drain(T0).map((pending) => pending.subject),
      ['1', '2'],
      'the shared count stays in this process',
    );
  });

  it('prune forgets keys of ended windows', () => {
    const counts = new WindowCounts<number>(POLICY);
    counts.take(1, T0);
    counts.take(2, T0 + 60_000);
    counts.prune(T0 + 60_000);
    assert.equal(counts.size, 1);
  });

  describe('reservations', () => {
    const W0 = T0 / 1000;

    it('hold a slot each: the quota, reservations counting, is not exceeded', () => {
      const counts = new WindowCounts<string>(POLICY);
      const held = [1, 2, 3].map(() => counts.reserve('a', T0));
      assert.deepEqual(held, Array(3).fill({ key: 'a', windowStart: W0 }));
      assert.equal(counts.reserve('a', T0), undefined);
      assert.equal(counts.take('a', T0), -1, 'take counts them too');
      assert.equal(counts.remaining('a', T0), 0);
      assert.notEqual(counts.reserve('b', T0), undefined, 'other keys are not held');
    });

    it('release gives the slot back; confirm turns it into a count', () => {
      const counts = new WindowCounts<string>(POLICY);
      const [a, b, c] = [1, 2, 3].map(() => counts.reserve('a', T0)!);
      counts.release(a!);
      assert.equal(counts.remaining('a', T0), 1);
      assert.equal(counts.confirm(b!, T0), 1, 'what is left: one failure counted, one held');
      assert.equal(counts.confirm(c!, T0), 1);
      assert.equal(counts.remaining('a', T0), 1);
      assert.notEqual(counts.reserve('a', T0), undefined);
      assert.equal(counts.reserve('a', T0), undefined);
    });

    it('a reservation settled twice frees nothing more, and no count goes negative', () => {
      const counts = new WindowCounts<string>(POLICY);
      const a = counts.reserve('a', T0)!;
      counts.release(a);
      counts.release(a);
      assert.equal(counts.remaining('a', T0), 3);
      counts.confirm(a, T0);
      assert.equal(counts.remaining('a', T0), 3, 'nothing held, nothing counted');
      assert.deepEqual(counts.drain(T0), []);
    });

    it('belong to their window: the next starts free, and settling old ones leaves it alone', () => {
      const counts = new WindowCounts<string>(POLICY);
      const old = [1, 2, 3].map(() => counts.reserve('a', T0 + 59_000)!);
      assert.equal(counts.reserve('a', T0 + 59_999), undefined);
      const next = counts.reserve('a', T0 + 60_000);
      assert.deepEqual(next, { key: 'a', windowStart: W0 + 60 });
      assert.equal(counts.remaining('a', T0 + 60_000), 2);
      counts.release(old[0]!);
      assert.equal(counts.confirm(old[1]!, T0 + 60_000), 2, 'counted in no window');
      assert.equal(counts.remaining('a', T0 + 60_000), 2);
      assert.deepEqual(counts.drain(T0 + 60_000), []);
      counts.confirm(next!, T0 + 60_000);
      assert.deepEqual(counts.drain(T0 + 60_000), [
        { subject: 'a', windowStart: W0 + 60, count: 1 },
      ]);
    });

    it('a reservation whose window ended before it was settled counts nowhere', () => {
      const counts = new WindowCounts<string>(POLICY);
      const old = counts.reserve('a', T0 + 59_000)!;
      assert.deepEqual(counts.drain(T0 + 60_000), [], 'the ended window is forgotten');
      assert.equal(counts.confirm(old, T0 + 60_000), 3);
      assert.deepEqual(counts.drain(T0 + 60_000), []);
    });

    it('are never drained: only confirmed ones reach the shared store, once', () => {
      const counts = new WindowCounts<string>({ ...POLICY, quota: 10 });
      const a = counts.reserve('a', T0)!;
      const b = counts.reserve('a', T0)!;
      counts.add('a', T0);
      assert.deepEqual(counts.drain(T0), [{ subject: 'a', windowStart: W0, count: 1 }]);
      // Settled while on their way to the store, with others' counts in the total.
      counts.confirm(a, T0);
      counts.release(b);
      counts.settle([{ subject: 'a', windowStart: W0, count: 6 }]);
      assert.equal(counts.remaining('a', T0), 3, '6 shared + 1 confirmed since');
      assert.deepEqual(counts.drain(T0), [{ subject: 'a', windowStart: W0, count: 1 }]);
      counts.settle([{ subject: 'a', windowStart: W0, count: 7 }]);
      assert.equal(counts.remaining('a', T0), 3);
      assert.deepEqual(counts.drain(T0), [], 'the released one left nothing to send');
    });

    it('held while the shared total arrives: the decision counts them on top of it', () => {
      const counts = new WindowCounts<string>({ ...POLICY, quota: 10 });
      counts.add('a', T0);
      counts.drain(T0);
      const held = Array.from({ length: 4 }, () => counts.reserve('a', T0)!);
      counts.settle([{ subject: 'a', windowStart: W0, count: 6 }]);
      assert.equal(counts.remaining('a', T0), 0, '6 shared + 4 held');
      assert.equal(counts.reserve('a', T0), undefined);
      for (const reservation of held) counts.release(reservation);
      assert.equal(counts.remaining('a', T0), 4);
    });

    it('survive a failed round: restore brings back counts, and leaves reservations as they are', () => {
      const counts = new WindowCounts<string>(POLICY);
      const a = counts.reserve('a', T0)!;
      counts.add('a', T0);
      counts.drain(T0);
      counts.restore();
      assert.equal(counts.remaining('a', T0), 1);
      counts.confirm(a, T0);
      assert.deepEqual(counts.drain(T0), [{ subject: 'a', windowStart: W0, count: 2 }]);
    });

    it('keep their key from being forgotten when the table is full', () => {
      const counts = new WindowCounts<string>(POLICY, 4);
      const held = counts.reserve('a', T0)!;
      for (let key = 100; key < 200; key++) counts.add(String(key), T0);
      assert.equal(counts.remaining('a', T0), 2, 'still held');
      assert.ok(counts.size <= 5, `${counts.size}`);
      counts.confirm(held, T0);
      assert.deepEqual(
        counts.drain(T0).find((pending) => pending.subject === 'a'),
        { subject: 'a', windowStart: W0, count: 1 },
      );
    });
  });

  describe('shared counts', () => {
    it('drain takes out what was counted since the last drain, settle takes the totals', () => {
      const counts = new WindowCounts<number>({ ...POLICY, quota: 10 });
      counts.take(1, T0);
      counts.take(1, T0);
      counts.take(2, T0);
      const pending = counts.drain(T0);
      assert.deepEqual(pending, [
        { subject: '1', windowStart: T0 / 1000, count: 2 },
        { subject: '2', windowStart: T0 / 1000, count: 1 },
      ]);
      // Counted while the drained counts are on their way: both still count.
      counts.take(1, T0);
      assert.equal(counts.remaining(1, T0), 7);
      // Another process had counted 5 for token 1: the total says 7.
      counts.settle([
        { subject: '1', windowStart: T0 / 1000, count: 7 },
        { subject: '2', windowStart: T0 / 1000, count: 1 },
      ]);
      assert.equal(counts.remaining(1, T0), 2, '7 shared + 1 counted since');
      assert.deepEqual(counts.drain(T0), [{ subject: '1', windowStart: T0 / 1000, count: 1 }]);
    });

    it('a decision counts the others: the quota runs out on the shared total', () => {
      const counts = new WindowCounts<number>({ ...POLICY, quota: 10 });
      counts.take(1, T0);
      counts.drain(T0);
      counts.settle([{ subject: '1', windowStart: T0 / 1000, count: 9 }]);
      assert.equal(counts.take(1, T0), 0);
      assert.equal(counts.take(1, T0), -1);
    });

    it('restore keeps counts the store did not take for the next drain', () => {
      const counts = new WindowCounts<number>(POLICY);
      counts.take(1, T0);
      counts.drain(T0);
      counts.take(1, T0);
      counts.restore();
      assert.equal(counts.remaining(1, T0), 1);
      assert.deepEqual(counts.drain(T0), [{ subject: '1', windowStart: T0 / 1000, count: 2 }]);
    });

    it('a total for a window that has ended meanwhile is ignored', () => {
      const counts = new WindowCounts<number>(POLICY);
      counts.take(1, T0 + 59_000);
      counts.drain(T0 + 59_000);
      counts.take(1, T0 + 60_000);
      counts.settle([{ subject: '1', windowStart: T0 / 1000, count: 3 }]);
      assert.equal(counts.remaining(1, T0 + 60_000), 2);
    });

    it('drain forgets keys whose window has ended, and sends nothing for them', () => {
      const counts = new WindowCounts<number>(POLICY);
      counts.take(1, T0);
      assert.deepEqual(counts.drain(T0 + 60_000), []);
      assert.equal(counts.size, 0);
    });
  });
});

describe('addressKey', () => {
  it('keeps IPv4 addresses, and unwraps IPv4-mapped IPv6 ones', () => {
    assert.equal(addressKey('192.0.2.1'), '192.0.2.1');
    assert.equal(addressKey('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(addressKey('::FFFF:192.0.2.1'), '192.0.2.1');
  });

  it('counts IPv6 addresses by their /64', () => {
    assert.equal(addressKey('2001:db8:0:1::1'), '2001:db8:0:1::/64');
    assert.equal(addressKey('2001:0db8:0000:0001:ffff:0:0:2'), '2001:db8:0:1::/64');
    assert.equal(addressKey('2001:DB8:0:1:aaaa::%eth0'), '2001:db8:0:1::/64');
    assert.equal(addressKey('::1'), '0:0:0:0::/64');
    assert.equal(addressKey('fe80::1'), 'fe80:0:0:0::/64');
    assert.equal(addressKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64');
    assert.notEqual(addressKey('2001:db8:0:1::1'), addressKey('2001:db8:0:2::1'));
  });

  it('puts what is not an address under one key', () => {
    assert.equal(addressKey(undefined), 'unknown');
    assert.equal(addressKey('not an address'), 'unknown');
  });
});

describe('RateLimit-Policy and RateLimit fields', () => {
  const policy = { name: 'token', quota: 100_000, windowSeconds: 60 };

  it('are the draft-11 lists: a String item with Integer parameters q, w and r, t', () => {
    assert.equal(policyField(policy), '"token";q=100000;w=60');
    assert.equal(limitField(policy)(99_998, 42), '"token";r=99998;t=42');
  });

  it('parse as Structured Field Lists (RFC 9651) to what they say', () => {
    const [[name, params]] = parseList(policyField(policy)) as [[unknown, Map<string, unknown>]];
    assert.equal(name, 'token');
    assert.deepEqual(
      [...params],
      [
        ['q', 100_000],
        ['w', 60],
      ],
    );
    const [[limitName, limitParams]] = parseList(limitField(policy)(0, 1)) as [
      [unknown, Map<string, unknown>],
    ];
    assert.equal(limitName, 'token');
    assert.deepEqual(
      [...limitParams],
      [
        ['r', 0],
        ['t', 1],
      ],
    );
  });

  it('escape a name as an sf-string, and refuse one that cannot be', () => {
    const odd = { ...policy, name: 'a"b\\c' };
    assert.equal(parseList(policyField(odd))[0]![0], 'a"b\\c');
    assert.throws(() => policyField({ ...policy, name: 'é' }), /not a Structured Field String/);
  });
});
