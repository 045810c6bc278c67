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
 * Waits until the shared total of `policy` is `total`, polling the table (the processes
 * that add to it say nothing when they do).
 */
export async function awaitTotal(url: string, policy: string, total: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = (await rateLimitRows(url)).find((row) => row.policy === policy)?.count;
    if (found === String(total)) return;
    assert.ok(Date.now() < deadline, `the ${policy} total is ${found}, not ${total}`);
    await sleep(SYNC_INTERVAL_MS / 5);
  }
}
