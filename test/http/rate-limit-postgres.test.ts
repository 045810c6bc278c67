import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { composeApp } from '../../src/server/compose.js';
import { TokenService } from '../../src/service/token-service.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import type { RateLimitStore } from '../../src/store/store.js';
import {
  collectCrashes,
  databaseBehindProxy,
  freshDatabase,
  POSTGRES_SKIP,
} from '../helpers/postgres.js';
import { awaitTotal } from '../helpers/rate-limit-rows.js';

// The rate limits of one process on PostgreSQL: a burst of failed authentications, and
// the counts kept through an outage of the database and shared once it is back. The app's
// clock stands still: no window ends, and no token lookup is cached out, during a test.

const NOW = Date.now();
/** The clock of the apps under test. */
const now = () => NOW;

/** Watches `add` on the store: `next()` resolves when a call made after it fails. */
function failuresOf(rateLimits: RateLimitStore) {
  const add = rateLimits.add.bind(rateLimits);
  let failed = () => {};
  rateLimits.add = async (counts) => {
    try {
      return await add(counts);
    } catch (error) {
      failed();
      throw error;
    }
  };
  // The sync's timer does not keep the process alive: this deadline does, meanwhile.
  const next = () =>
    new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error('no round failed within 10 s')), 10_000);
      failed = () => {
        clearTimeout(deadline);
        resolve();
      };
    });
  return { next };
}

if (POSTGRES_SKIP) {
  it('rate limits on PostgreSQL', { skip: POSTGRES_SKIP }, () => {});
} else {
  describe('failed authentications in a burst', () => {
    it(
      'one process looks up no more guesses than the limit, and a valid token gives its slot back',
      { timeout: 60_000 },
      async (t) => {
        const url = await freshDatabase(t);
        const store = await openPostgresStore({ url });
        const app = composeApp({
          store,
          rateLimits: { perToken: null, authFailures: { quota: 100, windowSeconds: 86_400 } },
          now,
          // All 300 lookups run, so that the failed-authentication limit is what holds them.
          unseenTokenLookups: { running: 1_000, waiting: 0 },
        });
        t.after(async () => {
          await app.close();
          await store.close();
        });
        await app.ready();
        const { token } = await new TokenService(store.tokens).create({
          name: 'burst',
          scopes: ['plants:read'],
          expiresInMs: null,
        });
        const list = async (bearer: string) => {
          const res = await app.inject({
            method: 'GET',
            url: '/plants',
            headers: { authorization: `Bearer ${bearer}` },
          });
          return res.statusCode === 429
            ? `429 ${(res.json() as { error: number }).error}`
            : String(res.statusCode);
        };

        // Every lookup waits on the pool and the network: all 300 are in flight together.
        const answers = await Promise.all([
          list(token),
          ...Array.from({ length: 299 }, (_, i) => list(`pst_guess${i}`)),
        ]);
        const tally = (status: string) => answers.filter((answer) => answer === status).length;
        assert.equal(answers[0], '200', 'the valid token, first in, had a slot');
        assert.ok(tally('401') <= 100, `${tally('401')} failures looked up, over the limit of 100`);
        assert.equal(tally('200') + tally('401') + tally('429 42902'), 300, answers.join());
        // The valid token's slot was given back: the address fails exactly 100 times in all.
        let more = 0;
        while ((await list(`pst_more${more}`)) === '401') more += 1;
        assert.equal(tally('401') + more, 100);
        // And the shared total is those 100: no count for the valid token's slot.
        await awaitTotal(url, 'failed-auth', 100);
      },
    );
  });

  describe('the database going away', () => {
    it('limits go on per process, nothing fails because of them, counts are shared once it is back', async (t) => {
      const crashes = collectCrashes(t);
      const { url, direct, proxy } = await databaseBehindProxy(t);
      const store = await openPostgresStore({ url });
      const failedAdds = failuresOf(store.rateLimits!);
      const app = composeApp({
        store,
        rateLimits: { perToken: { quota: 5, windowSeconds: 86_400 }, authFailures: null },
        now,
      });
      t.after(async () => {
        await app.close();
        await proxy.close();
        await store.close();
      });
      await app.ready();
      const { token } = await new TokenService(store.tokens).create({
        name: 'outage',
        scopes: ['plants:read'],
        expiresInMs: null,
      });
      const list = async () =>
        (
          await app.inject({
            method: 'GET',
            url: '/plants',
            headers: { authorization: `Bearer ${token}` },
          })
        ).statusCode;

      assert.deepEqual([await list(), await list(), await list()], [200, 200, 200]);
      await proxy.cut();
      // The token is still cached: the store is needed for the plants only.
      assert.deepEqual(
        [await list(), await list(), await list()],
        [503, 503, 429],
        'two more counted (a valid token counts whatever the answer), then the limit',
      );
      // A round of the sync fails to share the counts (and keeps them) while it is cut.
      await failedAdds.next();
      await proxy.restore();
      // ...and once it is back, shares them.
      await awaitTotal(direct, 'token', 5);
      assert.deepEqual(crashes, []);
    });
  });
}
