import { type EventRow, toChangeEvent } from '../event-rows.js';
import type { FanOutStep, FanOutWake, WebhookEvents } from '../store.js';
import {
  type LogEndpoint,
  MESSAGES_PER_ENDPOINT,
  endpointsPerFanOut,
  MAX_PROBES,
  planFanOut,
  type ReadBehind,
  SCAN_PER_ENDPOINT,
  STALLED_AFTER_MS,
  STALLED_LOOK_MS,
  STALLED_PENDING,
  STALLED_SCAN,
  WITH_ROOM,
} from '../webhook-log.js';
import { epochMillis, type MessageSignal } from '../webhook-rows.js';
import { PG_EVENT_COLUMNS, type PostgresEventLog } from './plant-events.js';
import type { Query } from './query.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

// The fan-out of the log's events into messages (see WebhookEvents), in two statements. The
// first reads the endpoints furthest behind that have room, each with the events above its
// position and up to the watermark (every seq up to it is final: no event still committing is
// passed, see 0011_changes_feed.sql); planFanOut (webhook-log.ts) makes their messages. The
// second moves each position only if it is still where the read found it and the endpoint
// still enabled, and writes the messages of the endpoints it moved, in one statement: two
// processes that read the same endpoint at once write its messages once (the second's
// UPDATE waits for the first's commit, then finds the position moved), and a crash between
// the two loses nothing.

/**
 * The endpoints `endpoints` picks, each with up to `asked` of the events above its position,
 * up to $1.
 */
const withEvents = (endpoints: string, asked: number) => `SELECT r.room, x.* FROM (
    SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE ${WITH_ROOM}) AS room) r
  LEFT JOIN LATERAL (
    SELECT e.id, e.log_position, e.events, e.pending, a.* FROM (${endpoints}) e
    LEFT JOIN LATERAL (
      SELECT ${PG_EVENT_COLUMNS} FROM audit_log
      WHERE seq > e.log_position AND seq <= $1
      ORDER BY seq LIMIT ${asked}) a ON true) x ON true`;

/** The endpoints with room furthest behind the head $1, at most $2. */
const BEHIND = withEvents(
  `SELECT id, log_position, events, pending FROM webhook_endpoints
  WHERE ${WITH_ROOM} AND log_position < $1 ORDER BY log_position LIMIT $2`,
  SCAN_PER_ENDPOINT,
);

/**
 * Full, its probes not all out, behind $1, and none of its messages due before $3 (see
 * STALLED_AFTER_MS); $2 at most.
 */
const STALLED = withEvents(
  `SELECT id, log_position, events, ${STALLED_PENDING} AS pending FROM webhook_endpoints e
  WHERE enabled AND pending >= ${MESSAGES_PER_ENDPOINT}
    AND pending < ${MESSAGES_PER_ENDPOINT + MAX_PROBES} AND log_position < $1
    AND NOT EXISTS (SELECT 1 FROM webhook_messages m
      WHERE m.endpoint_id = e.id AND m.status = 'pending' AND m.next_attempt_at <= $3)
  ORDER BY log_position LIMIT $2`,
  STALLED_SCAN,
);

// The endpoints are locked in id order first, so that two processes moving some of the same
// endpoints wait for each other rather than deadlock.
const WRITE = `WITH moves AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[])
      AS m(id, from_position, to_position, n)),
  locked AS (
    SELECT e.id FROM webhook_endpoints e WHERE e.id IN (SELECT id FROM moves)
    ORDER BY e.id FOR UPDATE),
  moved AS (
    UPDATE webhook_endpoints e SET log_position = m.to_position, pending = e.pending + m.n
    FROM moves m JOIN locked l ON l.id = m.id
    WHERE e.id = m.id AND e.log_position = m.from_position AND e.enabled
    RETURNING e.id),
  outboxed AS (
    INSERT INTO webhook_messages
      (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
    SELECT w.endpoint_id, w.webhook_id, w.event_type, w.payload, w.created_at, w.created_at
    FROM unnest($5::bigint[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
      WITH ORDINALITY AS w(endpoint_id, webhook_id, event_type, payload, created_at, n)
    WHERE w.endpoint_id IN (SELECT id FROM moved)
    ORDER BY w.n
    RETURNING 1),
  notified AS (
    SELECT pg_notify('${WEBHOOK_CHANNEL}', '') FROM (SELECT 1 FROM outboxed LIMIT 1) o)
  SELECT (SELECT count(*) FROM outboxed) AS messages, (SELECT count(*) FROM notified) AS notified`;

interface BehindRow extends Partial<EventRow> {
  room: boolean;
  id: bigint | null;
  log_position: bigint;
  events: string;
  pending: number;
}

/**
 * The fan-out on PostgreSQL; `wakes` is fired by this process's plant writes, message ends and
 * endpoint changes, `messages` (the queue's signal) by a fan-out that wrote messages.
 * `readable` answers the watermark and how long it waited for it (PostgresEventLog);
 * `othersBusy` whether other work uses the pool: the plant writes go on beside a fan-out on
 * the pool's other connections, so a fan-out's time costs them only while there are any. At
 * a tenth of the time, counted always, a healthy endpoint's messages of a burst waited 1 to
 * 3 s behind 20 hung ones (test/process/webhooks-fairness.test.ts); at three tenths, a burst
 * of creates beside 1,000 healthy endpoints fell to 0.2 to 0.5x the creates a second
 * (bench/HISTORY.md, by a method since found to flatter the server with endpoints: see its
 * endpoint-burst entry).
 */
export function postgresWebhookEvents(
  query: Query,
  readable: PostgresEventLog['readable'],
  wakes: MessageSignal<FanOutWake>,
  messages: MessageSignal,
  othersBusy: () => boolean,
): WebhookEvents {
  let lookedForStalled = -Infinity;
  return {
    async fanOut(maxMessages): Promise<FanOutStep> {
      const { position: head, waitedMs } = await readable();
      const limit = endpointsPerFanOut(maxMessages);
      const { rows } = await query<BehindRow>('webhooks.behind', BEHIND, [head.toString(), limit]);
      const room = rows[0]?.room === true;
      let stalled: BehindRow[] = [];
      const now = Date.now();
      if (now - lookedForStalled >= STALLED_LOOK_MS) {
        lookedForStalled = now;
        // Read apart from BEHIND: planFanOut takes an endpoint in both once.
        ({ rows: stalled } = await query<BehindRow>('webhooks.stalled', STALLED, [
          head.toString(),
          maxMessages,
          new Date(now + STALLED_AFTER_MS),
        ]));
      }
      const moves = planFanOut(
        readBehind(rows, SCAN_PER_ENDPOINT),
        readBehind(stalled, STALLED_SCAN),
        head,
        maxMessages,
      );
      if (moves.length === 0) return { endpoints: 0, messages: 0, room, waitedMs };
      const written = moves.flatMap((move) => move.messages);
      const { rows: done } = await query<{ messages: bigint }>('webhooks.fanOut', WRITE, [
        moves.map((move) => move.id.toString()),
        moves.map((move) => move.from.toString()),
        moves.map((move) => move.to.toString()),
        moves.map((move) => move.messages.length),
        written.map((message) => message.endpointId.toString()),
        written.map((message) => message.webhookId),
        written.map((message) => message.type),
        written.map((message) => message.payload),
        written.map((message) => message.at),
      ]);
      // Those another process moved first count too: it found them behind as well.
      const step = { endpoints: moves.length, messages: Number(done[0]!.messages), room, waitedMs };
      if (step.messages > 0) messages.fire();
      return step;
    },
    onEvents: (listener) => wakes.on(listener),
    othersBusy,
  };
}

/** The rows of BEHIND or STALLED (`asked` events each), an endpoint's together. */
function readBehind(rows: readonly BehindRow[], asked: number): ReadBehind[] {
  const endpoints = new Map<bigint, { endpoint: LogEndpoint; events: EventRow[] }>();
  for (const row of rows) {
    if (row.id === null) continue;
    let found = endpoints.get(row.id);
    if (found === undefined) {
      const endpoint = {
        id: row.id,
        position: row.log_position,
        events: row.events,
        pending: Number(row.pending),
      };
      found = { endpoint, events: [] };
      endpoints.set(row.id, found);
    }
    if (row.seq !== undefined && row.seq !== null) found.events.push(row as EventRow);
  }
  return [...endpoints.values()].map(({ endpoint, events }) => {
    // In order as read; sorted all the same, as a join's output order is not promised.
    events.sort((a, b) => (a.seq < b.seq ? -1 : 1));
    return { endpoint, events: events.map((row) => toChangeEvent(row, epochMillis)), asked };
  });
}
