// The records of webhook attempts on PostgreSQL (WebhookQueue.finish), written together: the
// attempts that end while one batch is being written go in the next, one statement and one
// commit for all of them. One statement an attempt cost more than the attempt itself: beside
// 1,000 healthy endpoints, a delivery took about 500 µs of the server's CPU and 750 µs of the
// database's, most of it in the statement's round trip and commit (bench/tools/delivery-drain.ts,
// bench/HISTORY.md).
import type { AttemptRecord, NextStep } from '../store.js';
import { finishedStatus, type MessageSignal, storableText } from '../webhook-rows.js';
import { REFILL_AT } from '../webhook-log.js';
import type { Query } from './query.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

/** The most attempts one statement records; more wait for the next. */
export const FINISH_BATCH = 256;

// The attempts, the messages' new states and their endpoints', each message only while the
// lease is the one given. The endpoints are locked first, in id order, as the fan-out locks
// them (webhook-events.ts), so that a batch, a fan-out and another process's batch wait for
// each other rather than deadlock; the InitPlan on `locked` takes every lock before the
// first message is written. Planned each time with its ids (see query.ts): a plan made once,
// on a new store's empty tables, reads webhook_messages whole to find them. The messages are found by id: "not delivered nor failed" says
// "pending" in a form webhook_messages_due cannot serve, since a plan by that index reads
// every pending message (the planner took it, finding few in its statistics). `locked` reads each endpoint as it is once locked: whether it
// was failing, and its pending count, before this batch.
const FINISH = `WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::timestamptz[],
        $5::timestamptz[], $6::timestamptz[], $7::integer[], $8::integer[], $9::text[],
        $10::text[], $11::text[])
      AS i (id, claimed_until, status, next_at, completed_at, at, duration_ms, http_status,
        error, excerpt, kind)),
  locked AS (
    SELECT e.id, e.failing_since, e.pending FROM webhook_endpoints e
    WHERE e.id = ANY(ARRAY(
      SELECT m.endpoint_id FROM webhook_messages m WHERE m.id = ANY($1::bigint[])))
    ORDER BY e.id FOR NO KEY UPDATE),
  settled AS (
    UPDATE webhook_messages m SET lease_until = NULL, status = i.status,
      next_attempt_at = i.next_at, completed_at = i.completed_at
    FROM input i
    WHERE m.id = ANY($1::bigint[]) AND m.id = i.id AND m.status NOT IN ('delivered', 'failed')
      AND m.lease_until = i.claimed_until
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING m.id, m.endpoint_id, i.at, i.kind, i.duration_ms, i.http_status, i.error,
      i.excerpt),
  logged AS (
    INSERT INTO webhook_attempts
      (message_id, at, duration_ms, http_status, error, response_excerpt)
    SELECT id, at, duration_ms, http_status, error, excerpt FROM settled),
  outcomes AS (
    SELECT s.endpoint_id,
      bool_or(s.kind = 'gone') AS gone,
      min(s.at) FILTER (WHERE s.kind = 'gone') AS gone_at,
      max(s.at) FILTER (WHERE s.kind = 'delivered') AS delivered_at,
      min(s.at) FILTER (WHERE s.kind <> 'delivered') AS first_failure,
      max(s.at) FILTER (WHERE s.kind <> 'delivered') AS last_failure
    FROM settled s GROUP BY s.endpoint_id),
  -- Failing since the first failure after the last delivery, if any came after it.
  failing AS (
    SELECT o.*, CASE
        WHEN o.last_failure IS NULL THEN NULL
        WHEN o.delivered_at IS NULL THEN coalesce(l.failing_since, o.first_failure)
        WHEN o.delivered_at > o.last_failure THEN NULL
        ELSE (SELECT min(s.at) FROM settled s WHERE s.endpoint_id = o.endpoint_id
          AND s.kind <> 'delivered' AND s.at > o.delivered_at) END AS since
    FROM outcomes o JOIN locked l ON l.id = o.endpoint_id),
  -- Only an endpoint whose state changes is written: a healthy one's deliveries leave it be.
  endpoint AS (
    UPDATE webhook_endpoints e SET
      failing_since = f.since,
      enabled = e.enabled AND NOT f.gone,
      disabled_reason = CASE WHEN f.gone AND e.enabled THEN 'gone' ELSE e.disabled_reason END,
      updated_at = CASE WHEN f.gone THEN f.gone_at ELSE e.updated_at END
    FROM failing f
    WHERE e.id = f.endpoint_id AND (f.gone OR e.failing_since IS DISTINCT FROM f.since))
  SELECT s.id, s.endpoint_id, s.kind, s.at, l.failing_since IS NOT NULL AS was_failing,
    l.pending AS pending_before
  FROM settled s JOIN locked l ON l.id = s.endpoint_id`;

// A delivered attempt after failures: the receiver is back, and the endpoint's other
// messages waiting for a later try are due now (see STALLED_AFTER_MS in webhook-log.ts). The
// row comparison, as in the claim, makes the range one of webhook_messages_due_by_endpoint:
// with `next_attempt_at > $2` alone, the planner, which finds few messages due later in its
// statistics, took a range of webhook_messages_due, every endpoint's retries.
const RECOVERED = `WITH recovered AS (
    UPDATE webhook_messages SET next_attempt_at = $2
    WHERE endpoint_id = $1 AND status = 'pending'
      AND (endpoint_id, next_attempt_at) > ($1::bigint, $2::timestamptz)
    RETURNING 1),
  notified AS (
    SELECT pg_notify('${WEBHOOK_CHANNEL}', '') FROM (SELECT 1 FROM recovered LIMIT 1) o)
  SELECT (SELECT count(*) FROM notified) AS notified`;

interface Finish {
  messageId: bigint;
  claimedUntil: Date;
  attempt: AttemptRecord;
  next: NextStep;
  done: (kept: boolean) => void;
  failed: (error: unknown) => void;
}

interface SettledRow {
  id: bigint;
  endpoint_id: bigint;
  kind: NextStep['kind'];
  at: Date;
  was_failing: boolean;
  pending_before: number;
}

/**
 * WebhookQueue.finish on PostgreSQL, in batches: an attempt that ends while no batch is being
 * written is written at once, alone; those that end meanwhile wait for it and go together
 * (at most FINISH_BATCH), as a group commit. Fires `signal` when an endpoint recovered (its
 * retries are due now) and calls `room` when ends took an endpoint down to REFILL_AT (the
 * fan-out may give it more).
 */
export function finishInBatches(
  query: Query,
  signal: MessageSignal,
  room: () => void,
): (
  messageId: bigint,
  claimedUntil: Date,
  attempt: AttemptRecord,
  next: NextStep,
) => Promise<boolean> {
  const waiting: Finish[] = [];
  let writing = false;

  const write = async (): Promise<void> => {
    writing = true;
    try {
      while (waiting.length > 0) {
        await settle(query, waiting.splice(0, FINISH_BATCH), signal, room);
      }
    } finally {
      writing = false;
    }
  };

  return (messageId, claimedUntil, attempt, next) =>
    new Promise<boolean>((done, failed) => {
      waiting.push({ messageId, claimedUntil, attempt, next, done, failed });
      if (!writing) void write();
    });
}

/** Writes one batch and settles its promises. */
async function settle(
  query: Query,
  batch: readonly Finish[],
  signal: MessageSignal,
  room: () => void,
): Promise<void> {
  const column = <T>(of: (finish: Finish) => T) => batch.map(of);
  let rows: SettledRow[];
  try {
    ({ rows } = await query<SettledRow>(
      'webhooks.finish',
      FINISH,
      [
        column((f) => f.messageId.toString()),
        column((f) => f.claimedUntil),
        column((f) => finishedStatus(f.next.kind)),
        column((f) => (f.next.kind === 'retry' ? f.next.at : f.attempt.at)),
        column((f) =>
          f.next.kind === 'delivered' || f.next.kind === 'failed' ? f.attempt.at : null,
        ),
        column((f) => f.attempt.at),
        column((f) => Math.round(f.attempt.durationMs)),
        column((f) => f.attempt.httpStatus),
        column((f) => (f.attempt.error === null ? null : storableText(f.attempt.error))),
        column((f) => storableText(f.attempt.responseExcerpt)),
        column((f) => f.next.kind),
      ],
      { planEachTime: true },
    ));
  } catch (error) {
    for (const finish of batch) finish.failed(error);
    return;
  }
  const endpoints = new Map<bigint, EndpointEnds>();
  for (const row of rows) {
    let endpoint = endpoints.get(row.endpoint_id);
    if (endpoint === undefined) {
      endpoint = { pendingBefore: row.pending_before, failing: row.was_failing, ended: 0 };
      endpoints.set(row.endpoint_id, endpoint);
    }
    if (row.kind === 'delivered' || row.kind === 'failed') endpoint.ended += 1;
    if (row.kind === 'delivered') {
      if (endpoint.delivered === undefined || row.at > endpoint.delivered.at) {
        endpoint.delivered = { at: row.at, messageId: row.id };
      }
    } else if (endpoint.firstFailure === undefined || row.at < endpoint.firstFailure) {
      endpoint.firstFailure = row.at;
    }
  }
  const kept = new Set(rows.map((row) => row.id));
  const recoveries: Promise<boolean>[] = [];
  const unrecorded = new Map<bigint, unknown>();
  let refill = false;
  for (const [id, endpoint] of endpoints) {
    // The ends that took it down to REFILL_AT: with more pending it has enough in hand. Ends
    // in two batches at once may both read the count before either (a refill then waits for
    // the poll).
    const after = endpoint.pendingBefore - endpoint.ended;
    if (endpoint.pendingBefore > REFILL_AT && after <= REFILL_AT) refill = true;
    const { delivered, firstFailure } = endpoint;
    // A delivery after failures, before this batch or in it: the endpoint is back.
    if (delivered === undefined) continue;
    if (!endpoint.failing && !(firstFailure !== undefined && firstFailure < delivered.at)) continue;
    recoveries.push(
      recover(query, id, delivered.at).catch((error: unknown) => {
        unrecorded.set(delivered.messageId, error);
        return false;
      }),
    );
  }
  if ((await Promise.all(recoveries)).some(Boolean)) signal.fire();
  if (refill) room();
  for (const finish of batch) {
    const error = unrecorded.get(finish.messageId);
    if (error === undefined) finish.done(kept.has(finish.messageId));
    else finish.failed(error);
  }
}

interface EndpointEnds {
  /** Its pending messages before the batch, and whether it was failing. */
  pendingBefore: number;
  failing: boolean;
  /** Messages the batch ended (delivered or failed for good). */
  ended: number;
  delivered?: { at: Date; messageId: bigint };
  firstFailure?: Date;
}

/**
 * Makes an endpoint's waiting retries due now (RECOVERED), in a statement of its own, the
 * endpoint a value: webhook_messages_due_by_endpoint answers it. A crash in between leaves
 * them to their retry schedule. Planned with its values, as the claim is (see query.ts).
 */
async function recover(query: Query, endpointId: bigint, at: Date): Promise<boolean> {
  const { rows } = await query<{ notified: bigint }>(
    'webhooks.recovered',
    RECOVERED,
    [endpointId.toString(), at],
    { planEachTime: true },
  );
  return Number(rows[0]?.notified ?? 0) > 0;
}
