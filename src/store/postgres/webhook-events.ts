import type { FanOutStep, WebhookEvents } from '../store.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { Query } from './query.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

// The fan-out of recorded events into messages (see WebhookEvents), one statement: `batch`
// takes the oldest events no other fan-out holds (FOR UPDATE SKIP LOCKED, so that every
// process may run one), as many as $1 messages allow if every enabled endpoint took each;
// `targets` numbers their messages to be, in event then endpoint order, and the first $1 are
// written. An event whose targets are all written is deleted; one cut off by $1 keeps where
// its messages reached (`fanned_to`) for the next fan-out. All of it commits together, so a
// crash at any point loses no event and writes no message twice. The events are deleted and
// updated by their keys (= ANY(ARRAY(...))), which only an index answers, whatever the
// planner makes of a batch it cannot count in advance. A webhook id is the event's Unix
// milliseconds in hex, then random digits, as on SQLite (sqlite/webhook-events.ts): each new
// one goes at the end of the UNIQUE index, not onto a random page of it.
const FAN_OUT = `WITH batch AS MATERIALIZED (
    SELECT id, event_type, payload, created_at, endpoint_max, fanned_to FROM webhook_events
    ORDER BY id
    LIMIT greatest(1, $1::bigint / greatest(1,
      (SELECT count(*) FROM webhook_endpoints WHERE enabled)))
    FOR UPDATE SKIP LOCKED),
  targets AS MATERIALIZED (
    SELECT b.id AS event_id, e.id AS endpoint_id, row_number() OVER (ORDER BY b.id, e.id) AS n
    FROM batch b JOIN webhook_endpoints e
      ON e.id > b.fanned_to AND e.id <= b.endpoint_max AND e.enabled
        AND position(' ' || b.event_type || ' ' IN ' ' || e.events || ' ') > 0),
  outboxed AS (
    INSERT INTO webhook_messages
      (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
    SELECT t.endpoint_id,
      'msg_' || lpad(to_hex(floor(extract(epoch FROM b.created_at) * 1000)::bigint), 12, '0')
        || right(replace(gen_random_uuid()::text, '-', ''), 20),
      b.event_type, b.payload, b.created_at, b.created_at
    FROM targets t JOIN batch b ON b.id = t.event_id
    WHERE t.n <= $1::bigint
    ORDER BY t.n
    RETURNING 1),
  unfinished AS (
    SELECT event_id, max(endpoint_id) FILTER (WHERE n <= $1::bigint) AS reached
    FROM targets GROUP BY event_id HAVING max(n) > $1::bigint),
  finished AS (
    DELETE FROM webhook_events WHERE id = ANY(ARRAY(
      SELECT id FROM batch WHERE id NOT IN (SELECT event_id FROM unfinished)))
    RETURNING 1),
  advanced AS (
    UPDATE webhook_events w
    SET fanned_to = (SELECT reached FROM unfinished u WHERE u.event_id = w.id)
    WHERE id = ANY(ARRAY(SELECT event_id FROM unfinished WHERE reached IS NOT NULL))),
  notified AS (
    SELECT pg_notify('${WEBHOOK_CHANNEL}', '') FROM (SELECT 1 FROM outboxed LIMIT 1) o)
  SELECT (SELECT count(*) FROM batch) AS events, (SELECT count(*) FROM finished) AS finished,
    (SELECT count(*) FROM outboxed) AS messages, (SELECT count(*) FROM notified) AS notified`;

interface FanOutRow {
  events: bigint;
  finished: bigint;
  messages: bigint;
}

/**
 * The events of plant writes on PostgreSQL; `events` is fired by the plant writes of this
 * process, `messages` (the queue's signal) by a fan-out that wrote messages.
 */
export function postgresWebhookEvents(
  query: Query,
  events: MessageSignal,
  messages: MessageSignal,
): WebhookEvents {
  return {
    async fanOut(maxMessages): Promise<FanOutStep> {
      const { rows } = await query<FanOutRow>('webhooks.fanOut', FAN_OUT, [maxMessages]);
      const row = rows[0]!;
      const step = {
        events: Number(row.events),
        finished: Number(row.finished),
        messages: Number(row.messages),
      };
      if (step.messages > 0) messages.fire();
      return step;
    },
    onEvents: (listener) => events.on(listener),
  };
}
