import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { SYNC_INTERVAL_MS } from '../../src/service/rate-limit-sync.js';

// The rate_limits table of a PostgreSQL test database, read directly, for the tests of
// limits shared between processes.

export async function rateLimitRows(
  url: string,
): Promise<{ policy: string; subject: string; count: string }[]> {
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
export async function sharedTotal(url: string, policy: string, total: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = (await rateLimitRows(url)).find((row) => row.policy === policy)?.count;
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
export async function awayFromMidnight(ms: number): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < ms) await sleep(left + 100);
}
