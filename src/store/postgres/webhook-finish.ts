// The records of webhook attempts on PostgreSQL (WebhookQueue.finish), written together: the
// attempts that end while one batch is being written go in the next, one statement and one
// commit for all of them. One statement an attempt cost more than the attempt itself: beside
// 1,000 healthy endpoints, a delivery took about 700 µs of the server's CPU and as much of the
// database's, most of it in the statement's round trip and commit (bench/HISTORY.md,
// bench/tools/delivery-drain.ts).
import type { Log } from '../../core/log.js';
import { StoreUnavailableError } from '../../core/unavailable.js';
import type { AttemptRecord, NextStep } from '../store.js';
import { REFILL_AT } from '../webhook-log.js';
import { finishedStatus, type MessageSignal, storableText } from '../webhook-rows.js';
import { lostRace, type Query } from './query.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

/** The most attempts one statement records; more wait for the next. */
export const FINISH_BATCH = 256;

// The attempts, the messages' new states and their endpoints', each message only while the
// lease is the one given; `n` tells the attempts apart (one message may come twice, a lease
// lost and the next). The endpoints are locked first, in id order, as the fan-out locks them
// (webhook-events.ts), so that a batch, a fan-out and another process's batch wait for each
// other rather than deadlock: the InitPlan on `locked` takes every lock before the first
// message is written (test/store/webhooks.test.ts holds a lock to check it). `locked` reads
// each endpoint as it is once locked: whether it was failing, and its pending count, before
// this batch. The messages are found by id, planned each time with the ids (see query.ts): a
// plan made once, on a new store's empty tables, read webhook_messages whole. "Neither
// delivered nor failed" says "pending" in a form webhook_messages_due cannot serve: a plan by
// that index reads every pending message, and the planner took it when its statistics showed
// few. An endpoint's attempts are taken in the order they began (`at`), not the order they
// ended, as they would be one by one: a failure that began before a delivery and ended after
// it leaves the endpoint healthy. Only an endpoint whose state changes is written.
const FINISH = `WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::timestamptz[],
        $5::timestamptz[], $6::timestamptz[], $7::integer[], $8::integer[], $9::text[],
        $10::text[], $11::text[]) WITH ORDINALITY
      AS i (id, claimed_until, status, next_at, completed_at, at, duration_ms, http_status,
        error, excerpt, kind, n)),
  locked AS (
    SELECT e.id, e.failing_since, e.pending FROM webhook_endpoints e
    WHERE e.id = ANY(ARRAY(
      SELECT m.endpoint_id FROM webhook_messages m WHERE m.id = ANY($1::bigint[])))
    ORDER BY e.id FOR NO KEY UPDATE),
  settled AS (
    UPDATE webhook_messages m SET lease_until = NULL, status = i.status,
      next_attempt_at = i.next_at, completed_at = i.completed_at
    FROM input i
    WHERE m.id = ANY($1::bigint[]) AND m.id = i.id
      AND m.status NOT IN ('delivered', 'failed') AND m.lease_until = i.claimed_until
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING m.id, m.endpoint_id, i.n, i.at, i.kind, i.duration_ms, i.http_status, i.error,
      i.excerpt),
  logged AS (
    INSERT INTO webhook_attempts
      (message_id, at, duration_ms, http_status, error, response_excerpt)
    SELECT id, at, duration_ms, http_status, error, excerpt FROM settled),
  outcomes AS (
    SELECT s.endpoint_id,
      bool_or(s.kind = 'gone') AS gone,
      max(s.at) FILTER (WHERE s.kind = 'gone') AS gone_at,
      max(s.at) FILTER (WHERE s.kind = 'delivered') AS delivered_at,
      min(s.at) FILTER (WHERE s.kind <> 'delivered') AS first_failure,
      max(s.at) FILTER (WHERE s.kind <> 'delivered') AS last_failure
    FROM settled s GROUP BY s.endpoint_id),
  -- Failing since the first failure after the last delivery, if any came after it.
  failing AS (
    SELECT o.*, CASE
        WHEN o.last_failure IS NULL THEN NULL
        WHEN o.delivered_at IS NULL THEN coalesce(l.failing_since, o.first_failure)
        WHEN o.delivered_at >= o.last_failure THEN NULL
        ELSE (SELECT min(s.at) FROM settled s WHERE s.endpoint_id = o.endpoint_id
          AND s.kind <> 'delivered' AND s.at > o.delivered_at) END AS since
    FROM outcomes o JOIN locked l ON l.id = o.endpoint_id),
  endpoint AS (
    UPDATE webhook_endpoints e SET
      failing_since = f.since,
      enabled = e.enabled AND NOT f.gone,
      disabled_reason = CASE WHEN f.gone AND e.enabled THEN 'gone' ELSE e.disabled_reason END,
      updated_at = CASE WHEN f.gone THEN f.gone_at ELSE e.updated_at END
    FROM failing f
    WHERE e.id = f.endpoint_id AND (f.gone OR e.failing_since IS DISTINCT FROM f.since))
  SELECT s.id, s.endpoint_id, s.n, s.kind, s.at, l.failing_since IS NOT NULL AS was_failing,
    l.pending AS pending_before
  FROM settled s JOIN locked l ON l.id = s.endpoint_id`;

// A delivered attempt after failures: the receiver is back, and the endpoint's other
// messages waiting for a later try are due now (see STALLED_AFTER_MS in webhook-log.ts), but
// for those this batch just gave a later try for a failure after the delivery ($3). Leased
// messages are left alone: their attempt's end sets their next try, and a batch of another
// process holding one (it locks messages in another order than this index's) would deadlock
// with this statement. The row comparison makes the range one of
// webhook_messages_due_by_endpoint: with `next_attempt_at > $2` alone, the planner, which
// finds few messages due later in its statistics, took a range of webhook_messages_due, every
// endpoint's retries.
const RECOVERED = `WITH recovered AS (
    UPDATE webhook_messages SET next_attempt_at = $2
    WHERE endpoint_id = $1 AND status = 'pending'
      AND (endpoint_id, next_attempt_at) > ($1::bigint, $2::timestamptz)
      AND (lease_until IS NULL OR lease_until <= $2) AND id <> ALL($3::bigint[])
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
  /** The attempt's place in the batch, from 1. */
  n: bigint;
  kind: NextStep['kind'];
  at: Date;
  was_failing: boolean;
  pending_before: number;
}

/** What a batch did to one endpoint. */
interface EndpointEnds {
  /** Its pending messages before the batch, and whether it was failing. */
  pendingBefore: number;
  failing: boolean;
  /** Messages the batch ended (delivered or failed for good). */
  ended: number;
  delivered?: Date;
  /** The batch's failures: when each began, and its message. */
  failures: { at: Date; id: bigint }[];
}

/**
 * WebhookQueue.finish on PostgreSQL, in batches: an attempt that ends while no batch is being
 * written is written at once, alone; those that end meanwhile wait for it and go together
 * (at most FINISH_BATCH), as a group commit. A batch the database refuses for what it holds
 * is written again one attempt at a time, so that one attempt's trouble fails only its own;
 * one that could not be written at all (the database unreachable, a timeout) fails whole, its
 * attempts made again when their leases end; a deadlock's victim is written again once.
 * Fires `signal` when an endpoint recovered (its retries are due now) and calls `room` when
 * ends took an endpoint down to REFILL_AT (the fan-out may give it more).
 */
export function finishInBatches(
  query: Query,
  signal: MessageSignal,
  room: () => void,
  log: Log,
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
        const batch = waiting.splice(0, FINISH_BATCH);
        try {
          // Once more if it lost a race (a deadlock's victim, rolled back: nothing written);
          // failed whole, its attempts were made again, their messages delivered twice.
          await settle(query, batch, signal, room, log).catch((error: unknown) => {
            if (!lostRace(error)) throw error;
            log.warn({ err: error, attempts: batch.length }, 'recording webhook attempts raced');
            return settle(query, batch, signal, room, log);
          });
        } catch (error) {
          // Unreachable or timed out, each alone would fail the same way, one timeout after
          // another (minutes for a batch during an outage): only a batch refused for what it
          // holds is written again one attempt at a time.
          if (batch.length === 1 || error instanceof StoreUnavailableError) {
            for (const finish of batch) finish.failed(error);
            continue;
          }
          log.warn(
            { err: error, attempts: batch.length },
            'recording webhook attempts together failed; recording them one at a time',
          );
          for (const finish of batch) {
            await settle(query, [finish], signal, room, log).catch(finish.failed);
          }
        }
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

/** Writes one batch and settles its promises; rejects, settling none, if it was not written. */
async function settle(
  query: Query,
  batch: readonly Finish[],
  signal: MessageSignal,
  room: () => void,
  log: Log,
): Promise<void> {
  const column = <T>(of: (finish: Finish) => T) => batch.map(of);
  const { rows } = await query<SettledRow>(
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
  );
  const endpoints = new Map<bigint, EndpointEnds>();
  for (const row of rows) {
    let endpoint = endpoints.get(row.endpoint_id);
    if (endpoint === undefined) {
      endpoint = {
        pendingBefore: row.pending_before,
        failing: row.was_failing,
        ended: 0,
        failures: [],
      };
      endpoints.set(row.endpoint_id, endpoint);
    }
    if (row.kind === 'delivered' || row.kind === 'failed') endpoint.ended += 1;
    if (row.kind !== 'delivered') endpoint.failures.push({ at: row.at, id: row.id });
    else if (endpoint.delivered === undefined || row.at > endpoint.delivered) {
      endpoint.delivered = row.at;
    }
  }
  let recovered = false;
  let refill = false;
  for (const [id, endpoint] of endpoints) {
    // The ends that took it down to REFILL_AT: with more pending it has enough in hand. Ends
    // in two batches at once may both read the count before either (a refill then waits for
    // the poll).
    const after = endpoint.pendingBefore - endpoint.ended;
    if (endpoint.pendingBefore > REFILL_AT && after <= REFILL_AT) refill = true;
    const { delivered, failures } = endpoint;
    if (delivered === undefined) continue;
    // A delivery after failures, before this batch or in it: the endpoint is back.
    if (!endpoint.failing && !failures.some((failure) => failure.at < delivered)) continue;
    const later = failures.filter((failure) => failure.at >= delivered).map((f) => f.id);
    try {
      if (await recover(query, id, delivered, later)) recovered = true;
    } catch (error) {
      // The attempts are recorded; the retries wait for their schedule.
      log.error(
        { err: error, endpoint: id.toString() },
        'making the retries of a recovered webhook endpoint due failed; they wait for their schedule',
      );
    }
  }
  // Answered once the retries are due: a caller that claims next finds them (answered
  // before, a test's claim right after a recovering delivery now and then found none).
  const kept = new Set(rows.map((row) => Number(row.n) - 1));
  batch.forEach((finish, i) => finish.done(kept.has(i)));
  if (recovered) signal.fire();
  if (refill) room();
}

/**
 * Makes an endpoint's waiting retries due now (RECOVERED) but `except`, in a statement of its
 * own, the endpoint a value: webhook_messages_due_by_endpoint answers it. A crash in between
 * leaves them to their retry schedule. Planned with its values, as the claim is (see
 * query.ts).
 */
async function recover(
  query: Query,
  endpointId: bigint,
  at: Date,
  except: readonly bigint[],
): Promise<boolean> {
  const { rows } = await query<{ notified: bigint }>(
    'webhooks.recovered',
    RECOVERED,
    [endpointId.toString(), at, except.map(String)],
    { planEachTime: true },
  );
  return Number(rows[0]?.notified ?? 0) > 0;
}
