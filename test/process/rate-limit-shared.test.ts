import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseList } from 'structured-headers';
import { SYNC_INTERVAL_MS } from '../../src/service/rate-limit-sync.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { awaitTotal, rateLimitRows as rows } from '../helpers/rate-limit-rows.js';
import { awayFromMidnight, cli, startServer } from '../helpers/server-process.js';

// Two real server processes on one PostgreSQL database hold one limit between them.

/**
 * Waits until the shared total of `policy` is `total`: the round of the process that added
 * the last counts is then over, and its answer, the total, is on its way to that process.
 * The one fixed wait left in these tests follows: nothing outside a server process shows
 * when it has read that answer (a request would, but would count too).
 */
async function sharedTotal(url: string, policy: string, total: number): Promise<void> {
  await awaitTotal(url, policy, total);
  await sleep(SYNC_INTERVAL_MS);
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
  it('two server processes on one database', { skip: POSTGRES_SKIP }, () => {});
} else {
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
      // docs/operating.md bounds), then refuses.
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
}
