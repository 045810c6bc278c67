import type { Log } from '../../core/log.js';
import type { ClaimedMessage, WebhookQueue } from '../store.js';
import {
  type ClaimRow,
  earliestDue,
  type MessageSignal,
  NEXT_DUE_WINDOW,
  PURGE_BATCH,
  toClaimed,
} from '../webhook-rows.js';
import type { Query } from './query.js';
import { finishInBatches } from './webhook-finish.js';
import { postgresTime } from './webhooks.js';

// A claim takes each enabled endpoint's earliest due messages, at most its share, by
// webhook_messages_due_by_endpoint, then the first of every endpoint's before the second of
// any (one endpoint's backlog never fills a claim). It locks the rows it reads with FOR
// UPDATE SKIP LOCKED: claims running at once in other processes pass over them instead of
// waiting, and each message goes to one. The row comparison repeats the two conditions before
// it in a form only that index serves: a generic plan guesses a third of the queue for
// `next_attempt_at <= $1`, and took webhook_messages_due filtered by endpoint instead.
const CLAIM = `WITH share AS (
    SELECT e.id, coalesce(s.n, $4) AS n FROM webhook_endpoints e
    LEFT JOIN unnest($5::bigint[], $6::integer[]) AS s (id, n) ON s.id = e.id
    WHERE e.enabled),
  due AS (
    SELECT d.* FROM share CROSS JOIN LATERAL (
      SELECT m.id, m.endpoint_id, m.next_attempt_at FROM webhook_messages m
      WHERE m.endpoint_id = share.id AND m.status = 'pending'
        AND (m.endpoint_id, m.next_attempt_at) <= (share.id, $1)
        AND (m.lease_until IS NULL OR m.lease_until <= $1)
      ORDER BY m.next_attempt_at, m.id LIMIT share.n
      FOR UPDATE OF m SKIP LOCKED) d
    WHERE share.n > 0),
  taken AS (
    SELECT id FROM due
    ORDER BY row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id),
      next_attempt_at, id
    LIMIT $3),
  claimed AS (
    UPDATE webhook_messages m SET lease_until = $2, attempts = m.attempts + 1
    FROM taken WHERE m.id = taken.id
    RETURNING m.id, m.webhook_id, m.event_type, m.payload, m.created_at, m.attempts,
      m.endpoint_id)
  SELECT c.*, e.url, e.secret, e.previous_secret, e.previous_until
  FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id ORDER BY c.id`;

/**
 * The queue on PostgreSQL; `signal` is fired by this process's commits that wrote messages,
 * `room` after an attempt that ended a message (its endpoint may take the next: the fan-out
 * looks); `log` hears of what a batch of records could not do (webhook-finish.ts).
 */
export function postgresWebhookQueue(
  query: Query,
  signal: MessageSignal,
  room: () => void,
  log: Log,
): WebhookQueue {
  return {
    async claim(now, leaseMs, limit, shares): Promise<ClaimedMessage[]> {
      const until = new Date(now.getTime() + leaseMs);
      const named = [...(shares?.endpoints ?? [])];
      // Planned each time (see query.ts): the plan a process settles on for its first claims,
      // on a queue that is still small, reads all of webhook_messages to update the claimed.
      const { rows } = await query<ClaimRow>(
        'webhooks.claim',
        CLAIM,
        [
          now,
          until,
          limit,
          shares?.perEndpoint ?? limit,
          named.map(([id]) => id.toString()),
          named.map(([, n]) => n),
        ],
        { planEachTime: true },
      );
      return rows.map((row) => toClaimed(row, now, until, postgresTime));
    },
    finish: finishInBatches(query, signal, room, log),
    async release(messageId, claimedUntil, freeAt) {
      const { rowCount } = await query(
        'webhooks.release',
        `UPDATE webhook_messages SET lease_until = $3, attempts = attempts - 1
         WHERE id = $1 AND status = 'pending' AND lease_until = $2`,
        [messageId.toString(), claimedUntil, freeAt],
      );
      return (rowCount ?? 0) > 0;
    },
    // Due after the claim at $1: see the SQLite queue.
    async nextDue(after) {
      const { rows } = await query<{ due: Date | null; n: number; beyond: Date | null }>(
        'webhooks.nextDue',
        `SELECT min(greatest(f.next_attempt_at, f.lease_until))
             FILTER (WHERE e.enabled AND greatest(f.next_attempt_at, f.lease_until) > $1) AS due,
           count(*)::integer AS n,
           (SELECT min(next_attempt_at) FROM webhook_messages
            WHERE status = 'pending' AND next_attempt_at > $1) AS beyond
         FROM (SELECT next_attempt_at, lease_until, endpoint_id FROM webhook_messages
           WHERE status = 'pending' ORDER BY next_attempt_at LIMIT ${NEXT_DUE_WINDOW}) f
         JOIN webhook_endpoints e ON e.id = f.endpoint_id`,
        [after],
      );
      const row = rows[0];
      return row === undefined ? null : earliestDue(row.due, row.n, row.beyond);
    },
    async depth() {
      const { rows } = await query<{ n: bigint }>(
        'webhooks.pending',
        `SELECT count(*)::bigint AS n FROM webhook_messages WHERE status = 'pending'`,
        [],
      );
      return Number(rows[0]!.n);
    },
    async purge(before) {
      // In batches, so that no statement holds thousands of row locks for long, each read in
      // completed_at order: only webhook_messages_completed gives that order, so the plan is
      // that index whatever the statistics say (a planner with stale ones scanned the table).
      // Planned each time (see query.ts): the plan of the first purges, on a small table,
      // reads the table whole.
      let purged = 0;
      for (;;) {
        const { rowCount } = await query(
          'webhooks.purge',
          `DELETE FROM webhook_messages WHERE id = ANY(ARRAY(
             SELECT id FROM webhook_messages WHERE status <> 'pending' AND completed_at < $1
             ORDER BY completed_at LIMIT ${PURGE_BATCH}))`,
          [before],
          { planEachTime: true },
        );
        purged += rowCount ?? 0;
        if ((rowCount ?? 0) < PURGE_BATCH) return purged;
      }
    },
    async disableFailing(since, now) {
      const { rowCount } = await query(
        'webhooks.disableFailing',
        // Locked in id order first, as a batch of records locks them (webhook-finish.ts): in
        // the table's order, the two deadlocked.
        `UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'failing', updated_at = $2
         WHERE id IN (SELECT id FROM webhook_endpoints WHERE enabled AND failing_since <= $1
           ORDER BY id FOR UPDATE)`,
        [since, now],
      );
      return rowCount ?? 0;
    },
    onMessages: (listener) => signal.on(listener),
  };
}
