import type { RateLimitCount, RateLimitStore } from '../store.js';
import type { Query } from './query.js';

interface CountRow {
  policy: string;
  subject: string;
  window_start: bigint;
  window_end: bigint;
  count: bigint;
}

/** Rate-limit counts in the UNLOGGED table `rate_limits` (migration 0003). */
export function postgresRateLimits(query: Query): RateLimitStore {
  return {
    async add(counts: readonly RateLimitCount[]) {
      if (counts.length === 0) return [];
      // One statement for the whole batch. Rows are upserted in key order, so two
      // processes adding overlapping batches lock the rows in the same order (no deadlock).
      const { rows } = await query<CountRow>(
        'rateLimits.add',
        `INSERT INTO rate_limits AS r (policy, subject, window_start, window_end, count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
           AS batch (policy, subject, window_start, window_end, count)
         ORDER BY policy, subject, window_start
         ON CONFLICT (policy, subject, window_start)
           DO UPDATE SET count = r.count + excluded.count
         RETURNING policy, subject, window_start, window_end, count`,
        [
          counts.map((c) => c.policy),
          counts.map((c) => c.subject),
          counts.map((c) => c.windowStart),
          counts.map((c) => c.windowEnd),
          counts.map((c) => c.count),
        ],
      );
      return rows.map((row) => ({
        policy: row.policy,
        subject: row.subject,
        windowStart: Number(row.window_start),
        windowEnd: Number(row.window_end),
        count: Number(row.count),
      }));
    },
    async purge(before: number) {
      await query('rateLimits.purge', 'DELETE FROM rate_limits WHERE window_end < $1', [before]);
    },
  };
}
