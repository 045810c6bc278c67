import type Database from 'better-sqlite3';
import type {
  AttemptRecord,
  ClaimedMessage,
  ClaimShares,
  NextStep,
  WebhookQueue,
} from '../store.js';
import {
  type ClaimRow,
  finishedStatus,
  type MessageSignal,
  storableText,
  toClaimed,
} from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';
import { REFILL_AT } from '../webhook-log.js';
import { sqliteTime } from './webhooks.js';
import { earliestDue, NEXT_DUE_WINDOW, PURGE_BATCH } from '../webhook-rows.js';

const PURGED = `SELECT id FROM webhook_messages WHERE status <> 'pending' AND completed_at < @before
  ORDER BY completed_at LIMIT @limit`;

// A claim reads each enabled endpoint's earliest due messages, at most its share, by
// webhook_messages_due_by_endpoint, takes the first of every endpoint's before the second of
// any (one endpoint's backlog never fills a claim), and leases them, all in one write
// transaction: SQLite runs one at a time across every process on the file, so no two
// processes can take the same message.

function prepare(db: Database.Database) {
  return {
    enabled: db.prepare('SELECT id FROM webhook_endpoints WHERE enabled').pluck(),
    dueOf: db.prepare(
      `SELECT id, next_attempt_at FROM webhook_messages
       WHERE endpoint_id = @endpoint AND status = 'pending' AND next_attempt_at <= @now
         AND (lease_until IS NULL OR lease_until <= @now)
       ORDER BY next_attempt_at, id LIMIT @n`,
    ),
    lease: db.prepare(
      `UPDATE webhook_messages SET lease_until = @until, attempts = attempts + 1
       WHERE id IN (SELECT value FROM json_each(@ids))
       RETURNING id, webhook_id, event_type, payload, created_at, attempts, endpoint_id`,
    ),
    endpoints: db.prepare(
      `SELECT id, url, secret, previous_secret, previous_until FROM webhook_endpoints
       WHERE id IN (SELECT value FROM json_each(?))`,
    ),
    settle: db.prepare(
      `UPDATE webhook_messages SET lease_until = NULL, status = @status,
         next_attempt_at = @next, completed_at = @completed
       WHERE id = @id AND status = 'pending' AND lease_until = @claimedUntil
       RETURNING endpoint_id`,
    ),
    release: db.prepare(
      `UPDATE webhook_messages SET lease_until = @freeAt, attempts = attempts - 1
       WHERE id = @id AND status = 'pending' AND lease_until = @claimedUntil`,
    ),
    attempt: db.prepare(
      `INSERT INTO webhook_attempts
         (message_id, at, duration_ms, http_status, error, response_excerpt)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ),
    // A delivered attempt after failures: the receiver is back, and the endpoint's other
    // messages waiting for a later try are due now (see STALLED_AFTER_MS in webhook-log.ts).
    recovered: db.prepare(
      `UPDATE webhook_messages SET next_attempt_at = @at
       WHERE endpoint_id = @endpointId AND status = 'pending' AND next_attempt_at > @at
         AND EXISTS (SELECT 1 FROM webhook_endpoints
           WHERE id = @endpointId AND failing_since IS NOT NULL)`,
    ),
    succeeded: db.prepare('UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ?'),
    pendingOf: db.prepare('SELECT pending FROM webhook_endpoints WHERE id = ?').pluck(),
    failedOnce: db.prepare(
      'UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?) WHERE id = ?',
    ),
    gone: db.prepare(
      `UPDATE webhook_endpoints SET enabled = 0, updated_at = ?,
         disabled_reason = CASE WHEN enabled THEN 'gone' ELSE disabled_reason END,
         failing_since = coalesce(failing_since, ?) WHERE id = ?`,
    ),
    // Due after the claim at @after: what was due by then and is still pending is held back
    // by its endpoint's share, and an attempt's end signals when there is room for it.
    nextDue: db.prepare(
      `SELECT min(max(f.next_attempt_at, coalesce(f.lease_until, 0)))
           FILTER (WHERE e.enabled AND max(f.next_attempt_at, coalesce(f.lease_until, 0)) > @after)
           AS due,
         count(*) AS n,
         (SELECT min(next_attempt_at) FROM webhook_messages
          WHERE status = 'pending' AND next_attempt_at > @after) AS beyond
       FROM (SELECT next_attempt_at, lease_until, endpoint_id FROM webhook_messages
         WHERE status = 'pending' ORDER BY next_attempt_at LIMIT ${NEXT_DUE_WINDOW}) f
       JOIN webhook_endpoints e ON e.id = f.endpoint_id`,
    ),
    pending: db.prepare(`SELECT count(*) FROM webhook_messages WHERE status = 'pending'`).pluck(),
    // A batch of the messages past their retention, oldest first (see purge below).
    purgeAttempts: db.prepare(`DELETE FROM webhook_attempts WHERE message_id IN (${PURGED})`),
    purge: db.prepare(`DELETE FROM webhook_messages WHERE id IN (${PURGED})`),
    disableFailing: db.prepare(
      `UPDATE webhook_endpoints SET enabled = 0, disabled_reason = 'failing', updated_at = ?
       WHERE enabled AND failing_since <= ?`,
    ),
  };
}

type Statements = ReturnType<typeof prepare>;

/**
 * The queue on SQLite; `signal` is fired by the commits that wrote messages, `room` after an
 * attempt that ended a message (its endpoint may take the next: the fan-out looks).
 */
export function sqliteWebhookQueue(
  db: Database.Database,
  batches: GroupCommit,
  signal: MessageSignal,
  room: () => void,
): WebhookQueue {
  const write = batchedWrites(batches);
  const s = prepare(db);
  return {
    claim: (now, leaseMs, limit, shares) => write(() => claim(s, now, leaseMs, limit, shares)),
    async finish(messageId, claimedUntil, attempt, next) {
      const done = await write(() => finish(s, messageId, claimedUntil, attempt, next));
      if (done === undefined) return false;
      if (done.recovered) signal.fire();
      if (done.room) room();
      return true;
    },
    release: (id, claimedUntil, freeAt) =>
      write(
        () =>
          s.release.run({
            id,
            claimedUntil: claimedUntil.getTime(),
            freeAt: freeAt.getTime(),
          }).changes > 0,
      ),
    async nextDue(after) {
      const { due, n, beyond } = guard(() => s.nextDue.get({ after: after.getTime() })) as {
        due: bigint | null;
        n: bigint;
        beyond: bigint | null;
      };
      const at = (time: bigint | null) => (time === null ? null : sqliteTime(time));
      return earliestDue(at(due), Number(n), at(beyond));
    },
    async depth() {
      return Number(guard(() => s.pending.get()) as bigint);
    },
    // A batch a write, so that a retention that ends for many messages at once never holds
    // the database for long: other writes take their turns between the batches.
    async purge(before) {
      const params = { before: before.getTime(), limit: PURGE_BATCH };
      let purged = 0;
      for (;;) {
        const changes = await write(() => {
          s.purgeAttempts.run(params);
          return s.purge.run(params).changes;
        });
        purged += changes;
        if (changes < PURGE_BATCH) return purged;
      }
    },
    disableFailing: (since, now) =>
      write(() => s.disableFailing.run(now.getTime(), since.getTime()).changes),
    onMessages: (listener) => signal.on(listener),
  };
}

/** The ids of the messages a claim takes (see the comment on the statements). */
function due(s: Statements, now: Date, limit: number, shares?: ClaimShares): bigint[] {
  const found: { id: bigint; at: bigint; turn: number }[] = [];
  for (const endpoint of s.enabled.all() as bigint[]) {
    const n = shares?.endpoints.get(endpoint) ?? shares?.perEndpoint ?? limit;
    if (n <= 0) continue;
    const rows = s.dueOf.all({ endpoint, now: now.getTime(), n }) as {
      id: bigint;
      next_attempt_at: bigint;
    }[];
    rows.forEach((row, turn) => found.push({ id: row.id, at: row.next_attempt_at, turn }));
  }
  const order = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
  found.sort((a, b) => a.turn - b.turn || order(a.at, b.at) || order(a.id, b.id));
  return found.slice(0, limit).map((row) => row.id);
}

function claim(
  s: Statements,
  now: Date,
  leaseMs: number,
  limit: number,
  shares?: ClaimShares,
): ClaimedMessage[] {
  const until = new Date(now.getTime() + leaseMs);
  const ids = due(s, now, limit, shares);
  if (ids.length === 0) return [];
  const messages = s.lease.all({
    until: until.getTime(),
    ids: JSON.stringify(ids.map(String)),
  }) as Omit<ClaimRow, 'url' | 'secret' | 'previous_secret' | 'previous_until'>[];
  const endpointIds = JSON.stringify([...new Set(messages.map((m) => m.endpoint_id.toString()))]);
  const endpoints = new Map(
    (
      s.endpoints.all(endpointIds) as (Pick<
        ClaimRow,
        'url' | 'secret' | 'previous_secret' | 'previous_until'
      > & { id: bigint })[]
    ).map((row) => [row.id, row]),
  );
  return messages
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((message) => {
      const { url, secret, previous_secret, previous_until } = endpoints.get(message.endpoint_id)!;
      const row = { ...message, url, secret, previous_secret, previous_until };
      return toClaimed(row, now, until, sqliteTime);
    });
}

/**
 * What an attempt's end did: undefined when the lease was no longer the claim's; `room` when
 * its endpoint has just got room for a message (the fan-out looks), `recovered` when it made
 * other messages due (the dispatcher looks).
 */
function finish(
  s: Statements,
  messageId: bigint,
  claimedUntil: Date,
  attempt: AttemptRecord,
  next: NextStep,
): { room: boolean; recovered: boolean } | undefined {
  const at = attempt.at.getTime();
  const settled = s.settle.get({
    id: messageId,
    claimedUntil: claimedUntil.getTime(),
    status: finishedStatus(next.kind),
    next: next.kind === 'retry' ? next.at.getTime() : at,
    completed: next.kind === 'delivered' || next.kind === 'failed' ? at : null,
  }) as { endpoint_id: bigint } | undefined;
  if (settled === undefined) return undefined;
  const { durationMs, httpStatus, error, responseExcerpt } = attempt;
  s.attempt.run(
    messageId,
    at,
    Math.round(durationMs),
    httpStatus,
    error === null ? null : storableText(error),
    storableText(responseExcerpt),
  );
  const endpointId = settled.endpoint_id;
  let recovered = false;
  if (next.kind === 'delivered') {
    recovered = s.recovered.run({ endpointId, at }).changes > 0;
    s.succeeded.run(endpointId);
  } else if (next.kind === 'gone') s.gone.run(at, at, endpointId);
  else s.failedOnce.run(at, endpointId);
  // Only the end that takes it down to REFILL_AT: with more pending it has enough in hand.
  const room = Number(s.pendingOf.get(endpointId)) === REFILL_AT;
  return { room, recovered };
}
