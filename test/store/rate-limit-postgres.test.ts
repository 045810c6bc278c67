import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import type { RateLimitCount, RateLimitStore } from '../../src/store/store.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { rateLimitRows as rows } from '../helpers/rate-limit-rows.js';

// The statements of the PostgreSQL rate-limit store (the counts processes share); the
// processes sharing them are in test/process/rate-limit-shared.test.ts, one process
// through an outage in test/http/rate-limit-postgres.test.ts.

const count = (subject: string, windowStart: number, n: number): RateLimitCount => ({
  policy: 'token',
  subject,
  windowStart,
  windowEnd: windowStart + 60,
  count: n,
});

async function rateLimitStore(t: TestContext, url: string): Promise<RateLimitStore> {
  const store = await openPostgresStore({ url });
  t.after(() => store.close());
  assert.ok(store.rateLimits !== undefined);
  return store.rateLimits;
}

if (POSTGRES_SKIP) {
  it('the rate_limits table', { skip: POSTGRES_SKIP }, () => {});
} else {
  describe('the rate_limits table', () => {
    it('adds each count to its total and answers the totals', async (t) => {
      const store = await rateLimitStore(t, await freshDatabase(t));
      assert.deepEqual(await store.add([]), []);
      assert.deepEqual(await store.add([count('1', 600, 3), count('2', 600, 1)]), [
        count('1', 600, 3),
        count('2', 600, 1),
      ]);
      const again = await store.add([count('1', 600, 2), count('1', 660, 5)]);
      assert.deepEqual(
        again.sort((a, b) => a.windowStart - b.windowStart),
        [count('1', 600, 5), count('1', 660, 5)],
      );
      const other = await store.add([{ ...count('1', 600, 1), policy: 'failed-auth' }]);
      assert.deepEqual(other, [{ ...count('1', 600, 1), policy: 'failed-auth' }]);
    });

    it('processes adding the same keys at once lose nothing and do not deadlock', async (t) => {
      const url = await freshDatabase(t);
      const stores = await Promise.all([rateLimitStore(t, url), rateLimitStore(t, url)]);
      const subjects = Array.from({ length: 50 }, (_, i) => String(i));
      await Promise.all(
        Array.from({ length: 20 }, (_, round) =>
          stores[round % 2]!.add(
            // Opposite orders in turn: the statement sorts them.
            (round % 2 ? [...subjects].reverse() : subjects).map((s) => count(s, 600, 1)),
          ),
        ),
      );
      const totals = await rows(url);
      assert.equal(totals.length, 50);
      for (const row of totals) assert.equal(row.count, '20', row.subject);
    });

    it('purge deletes the windows that ended before the time given', async (t) => {
      const url = await freshDatabase(t);
      const store = await rateLimitStore(t, url);
      await store.add([count('old', 0, 1), count('edge', 60, 1), count('new', 120, 1)]);
      await store.purge(120); // ends: old 60, edge 120, new 180
      assert.deepEqual(
        (await rows(url)).map((row) => row.subject),
        ['edge', 'new'],
      );
    });
  });
}
