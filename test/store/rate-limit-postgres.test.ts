import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { parseList } from 'structured-headers';
import { composeApp } from '../../src/cli/compose.js';
import { SYNC_INTERVAL_MS } from '../../src/service/rate-limit-sync.js';
import { TokenService } from '../../src/service/token-service.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import type { RateLimitCount, RateLimitStore } from '../../src/store/store.js';
import {
  collectCrashes,
  databaseBehindProxy,
  freshDatabase,
  POSTGRES_SKIP,
} from '../helpers/postgres.js';
import { cli, startServer } from '../helpers/server-process.js';

// Rate limits shared through PostgreSQL: the store's statements, two real server processes
// on one database holding one limit between them, and the limiter through an outage.

/** Long enough for every process to have added its counts and read the totals back. */
const SHARED_WITHIN_MS = 6 * SYNC_INTERVAL_MS;

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

async function rows(url: string): Promise<{ policy: string; subject: string; count: string }[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ policy: string; subject: string; count: string }>(
      'SELECT policy, subject, count::text FROM rate_limits ORDER BY policy, subject, window_start',
    );
    return result.rows;
  } finally {
    await client.end();
  }
}

/**
 * Waits until the shared total of `policy` is `total`: the round of the process that added
 * the last counts is then over, and that process knows the total. (Polling the table rather
 * than sleeping a fixed time keeps the test right on a loaded machine.)
 */
async function sharedTotal(url: string, policy: string, total: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = (await rows(url)).find((row) => row.policy === policy)?.count;
    if (found === String(total)) break;
    assert.ok(Date.now() < deadline, `the ${policy} total is ${found}, not ${total}`);
    await sleep(SYNC_INTERVAL_MS / 5);
  }
  // The answer reaches the process a moment after the commit is visible here.
  await sleep(SYNC_INTERVAL_MS);
}

/**
 * Waits, if need be, until the current day (UTC) has more than `ms` left, so a test using
 * day-long windows cannot see its window end halfway.
 */
async function awayFromMidnight(ms: number): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < ms) await sleep(left + 100);
}

interface Answer {
  status: number;
  error?: number;
  ratelimit?: string;
}

async function get(url: string, token: string | null): Promise<Answer> {
  const res = await fetch(`${url}/plants`, {
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
  const text = await res.text();
  return {
    status: res.status,
    ...(res.status >= 400 && { error: (JSON.parse(text) as { error: number }).error }),
    ...(res.headers.get('ratelimit') !== null && { ratelimit: res.headers.get('ratelimit')! }),
  };
}

/** `r` of a RateLimit field. */
const remaining = (answer: Answer): unknown =>
  (parseList(answer.ratelimit ?? '')[0]?.[1] as Map<string, unknown> | undefined)?.get('r');

if (POSTGRES_SKIP) {
  it('rate limits on PostgreSQL', { skip: POSTGRES_SKIP }, () => {});
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

  describe('two server processes on one database', () => {
    it('share the per-token limit and the failed-authentication limit', async (t) => {
      const url = await freshDatabase(t);
      const db = ['--database-url', url];
      const token = (await cli(['token', 'create', ...db])).stdout.trim();
      await awayFromMidnight(60_000);
      const limits = ['--rate-limit', '20/1d', '--auth-failure-limit', '6/1d'];
      const [a, b] = await Promise.all([
        startServer(t, [...db, ...limits]),
        startServer(t, [...db, ...limits]),
      ]);

      // Per token: 15 at A; B then learns them after its first request.
      for (let i = 0; i < 15; i++) assert.equal((await get(a.url, token)).status, 200);
      await sharedTotal(url, 'token', 15);
      assert.equal((await get(b.url, token)).status, 200);
      await sharedTotal(url, 'token', 16);
      const atB: Answer[] = [];
      for (let i = 0; i < 6; i++) atB.push(await get(b.url, token));
      assert.deepEqual(
        atB.map((answer) => [answer.status, answer.error ?? remaining(answer)]),
        [
          [200, 3],
          [200, 2],
          [200, 1],
          [200, 0],
          [429, 42901],
          [429, 42901],
        ],
        'B admits 20 - 16 more, not 20 - 1: it counts what A admitted',
      );
      // A learns of B's on its next round: it admits one more on its old view (the overshoot
      // the README bounds), then refuses.
      await sharedTotal(url, 'token', 20);
      assert.equal((await get(a.url, token)).status, 200);
      await sharedTotal(url, 'token', 21);
      const atA = await get(a.url, token);
      assert.deepEqual([atA.status, atA.error], [429, 42901]);

      // Failed authentications from 127.0.0.1: 4 at A, then B.
      for (let i = 0; i < 4; i++) assert.equal((await get(a.url, 'pst_wrong')).status, 401);
      await sharedTotal(url, 'failed-auth', 4);
      assert.equal((await get(b.url, null)).status, 401);
      await sharedTotal(url, 'failed-auth', 5);
      const failures = [await get(b.url, 'pst_wrong'), await get(b.url, 'pst_wrong')];
      assert.deepEqual(
        failures.map((answer) => [
          answer.status,
          answer.status === 429 ? answer.error : remaining(answer),
        ]),
        [
          [401, 0],
          [429, 42902],
        ],
        'B refuses after the 6th failure across both',
      );

      // failed-auth 6 (4 + 2); token 21: the overshoot of one, admitted by A on its old view.
      await sharedTotal(url, 'failed-auth', 6);
      assert.deepEqual(
        (await rows(url)).map((row) => [row.policy, Number(row.count)]),
        [
          ['failed-auth', 6],
          ['token', 21],
        ],
      );
    });
  });

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
