import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { composeApp } from '../../src/cli/compose.js';
import { SYNC_INTERVAL_MS } from '../../src/service/rate-limit-sync.js';
import { TokenService } from '../../src/service/token-service.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import {
  collectCrashes,
  databaseBehindProxy,
  freshDatabase,
  POSTGRES_SKIP,
} from '../helpers/postgres.js';
import {
  awayFromMidnight,
  rateLimitRows as rows,
  sharedTotal,
} from '../helpers/rate-limit-rows.js';

// The rate limits of one process on PostgreSQL: a burst of failed authentications, and
// the counts kept through an outage of the database and shared once it is back.

/** Long enough for every process to have added its counts and read the totals back. */
const SHARED_WITHIN_MS = 6 * SYNC_INTERVAL_MS;

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
        await awayFromMidnight(60_000);
        const app = composeApp({
          store,
          rateLimits: { perToken: null, authFailures: { quota: 100, windowSeconds: 86_400 } },
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
        await sharedTotal(url, 'failed-auth', 100);
      },
    );
  });

  describe('the database going away', () => {
    it('limits go on per process, nothing fails because of them, counts are shared once it is back', async (t) => {
      const crashes = collectCrashes(t);
      const { url, direct, proxy } = await databaseBehindProxy(t);
      const store = await openPostgresStore({ url });
      await awayFromMidnight(60_000);
      const app = composeApp({
        store,
        rateLimits: { perToken: { quota: 5, windowSeconds: 86_400 }, authFailures: null },
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
      // The token is still cached (2 s): the store is needed for the plants only.
      assert.deepEqual(
        [await list(), await list(), await list()],
        [503, 503, 429],
        'two more counted (a valid token counts whatever the answer), then the limit',
      );
      await sleep(SHARED_WITHIN_MS);
      await proxy.restore();
      const deadline = Date.now() + 10_000;
      let shared = await rows(direct);
      while (shared[0]?.count !== '5' && Date.now() < deadline) {
        await sleep(100);
        shared = await rows(direct);
      }
      assert.deepEqual(
        shared.map((row) => row.count),
        ['5'],
        'the counts made during the outage were kept and added',
      );
      assert.deepEqual(crashes, []);
    });
  });
}
