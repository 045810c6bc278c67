import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WindowCounts } from '../../src/core/window-counts.js';
import { PURGE_INTERVAL_MS, RateLimitSync } from '../../src/service/rate-limit-sync.js';
import type { RateLimitCount, RateLimitStore } from '../../src/store/store.js';

// The loop that shares counts between processes, against an in-memory store with the
// contract of the PostgreSQL one (which test/store/rate-limit-postgres.test.ts checks for real).

const T0 = Date.UTC(2024, 0, 1);
const POLICY = { name: 'token', quota: 10, windowSeconds: 60 };

class MemoryRateLimits implements RateLimitStore {
  readonly totals = new Map<string, RateLimitCount>();
  readonly purges: number[] = [];
  failing = false;
  adds = 0;
  /** Resolved by the test to let a pending add finish. */
  gate: Promise<void> | undefined;

  async add(counts: readonly RateLimitCount[]): Promise<RateLimitCount[]> {
    this.adds += 1;
    await this.gate;
    if (this.failing) throw new Error('connection refused');
    return counts.map((c) => {
      const key = `${c.policy} ${c.subject} ${c.windowStart}`;
      const count = (this.totals.get(key)?.count ?? 0) + c.count;
      this.totals.set(key, { ...c, count });
      return { ...c, count };
    });
  }

  async purge(before: number): Promise<void> {
    if (this.failing) throw new Error('connection refused');
    this.purges.push(before);
    for (const [key, total] of this.totals) if (total.windowEnd < before) this.totals.delete(key);
  }
}

function logRecorder() {
  const lines: string[] = [];
  return {
    lines,
    log: {
      error: (_fields: object, message: string) => void lines.push(`error: ${message}`),
      warn: (_fields: object, message: string) => void lines.push(`warn: ${message}`),
      info: (_fields: object, message: string) => void lines.push(`info: ${message}`),
    },
  };
}

/** One process: its counts and its sync loop, on a clock the test moves. */
function process(store: RateLimitStore | undefined, clock: { now: number }) {
  const counts = new WindowCounts<number>(POLICY);
  const { lines, log } = logRecorder();
  const sync = new RateLimitSync({ tokens: counts }, store, log, () => clock.now);
  return { counts, sync, lines };
}

test('two processes on one store: each learns the total, and the quota holds across both', async () => {
  const store = new MemoryRateLimits();
  const clock = { now: T0 };
  const a = process(store, clock);
  const b = process(store, clock);
  for (let i = 0; i < 4; i++) assert.ok(a.counts.take(1, clock.now) >= 0);
  for (let i = 0; i < 3; i++) assert.ok(b.counts.take(1, clock.now) >= 0);
  await a.sync.tick();
  await b.sync.tick();
  assert.equal(b.counts.remaining(1, clock.now), 3, 'b knows of a: 10 - 7');
  assert.equal(a.counts.remaining(1, clock.now), 6, 'a does not know of b yet');
  // A key's total is learnt when the process adds to it: after a's next request.
  assert.equal(a.counts.take(1, clock.now), 5);
  await a.sync.tick();
  assert.equal(a.counts.remaining(1, clock.now), 2, 'a learns of b on its next round');
  assert.deepEqual(
    [1, 2, 3].map(() => a.counts.take(1, clock.now)),
    [1, 0, -1],
  );
  await a.sync.tick();
  // b's view is one round old (7): it admits one more (the overshoot docs/operating.md bounds),
  // then learns the total on its round and refuses.
  assert.equal(b.counts.take(1, clock.now), 2);
  await b.sync.tick();
  assert.equal(b.counts.take(1, clock.now), -1);
  assert.equal(a.counts.take(1, clock.now), -1);
  assert.equal([...store.totals.values()][0]?.count, 11);
});

test('a failing store: rounds do not throw, counts are kept and sent once it is back', async () => {
  const store = new MemoryRateLimits();
  const clock = { now: T0 };
  const a = process(store, clock);
  store.failing = true;
  for (let i = 0; i < 6; i++) a.counts.take(1, clock.now);
  await a.sync.tick();
  await a.sync.tick();
  // Still limiting on its own counts.
  assert.equal(a.counts.remaining(1, clock.now), 4);
  for (let i = 0; i < 4; i++) a.counts.take(1, clock.now);
  assert.equal(a.counts.take(1, clock.now), -1);
  assert.deepEqual(a.lines, [
    'warn: rate-limit counts cannot be shared (database unavailable); limiting per process meanwhile',
  ]);
  store.failing = false;
  await a.sync.tick();
  assert.equal([...store.totals.values()][0]?.count, 10, 'nothing lost, nothing twice');
  assert.equal(a.lines.at(-1), 'info: rate-limit counts are shared again');
  assert.equal(a.counts.remaining(1, clock.now), 0);
});

test('ended windows are purged from the store at most once a minute, a minute late', async () => {
  const store = new MemoryRateLimits();
  const clock = { now: T0 };
  const a = process(store, clock);
  a.counts.take(1, clock.now);
  await a.sync.tick();
  clock.now += PURGE_INTERVAL_MS - 1;
  await a.sync.tick();
  assert.deepEqual(store.purges, [T0 / 1000 - 60]);
  clock.now += 1;
  a.counts.take(1, clock.now);
  await a.sync.tick();
  assert.deepEqual(store.purges, [T0 / 1000 - 60, T0 / 1000]);
  clock.now += 2 * PURGE_INTERVAL_MS;
  a.counts.take(1, clock.now);
  await a.sync.tick();
  assert.equal(store.purges.length, 3);
  assert.deepEqual(
    [...store.totals.values()].map((total) => total.windowStart - T0 / 1000),
    [60, 180],
    'windows that ended over a minute ago are gone',
  );
});

test('a round waiting on the store makes the next one a no-op, and nothing is counted twice', async () => {
  const store = new MemoryRateLimits();
  const clock = { now: T0 };
  const a = process(store, clock);
  let open: () => void = () => undefined;
  store.gate = new Promise((resolve) => (open = resolve));
  a.counts.take(1, clock.now);
  const first = a.sync.tick();
  a.counts.take(1, clock.now);
  await a.sync.tick();
  assert.equal(store.adds, 1);
  open();
  await first;
  store.gate = undefined;
  await a.sync.tick();
  assert.equal([...store.totals.values()][0]?.count, 2);
  assert.equal(a.counts.remaining(1, clock.now), 8);
});

test('without a store (SQLite), rounds only forget ended windows', async () => {
  const clock = { now: T0 };
  const a = process(undefined, clock);
  a.counts.take(1, clock.now);
  await a.sync.tick();
  assert.equal(a.counts.size, 1);
  clock.now += 60_000;
  await a.sync.tick();
  assert.equal(a.counts.size, 0);
});
