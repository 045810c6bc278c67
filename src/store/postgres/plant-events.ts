// The log of plant events on PostgreSQL (GET /events): the writes queue their events in their
// own statements (queueCte), and a sequencer numbers the committed ones afterwards, one run at
// a time, so that every reader sees positions in one order with no gap filled later. Why it
// is built this way: the migration 0011_plant_events.sql.
import type { ChangeEvent } from '../../core/change-events.js';
import type { WebhookEvent } from '../../core/webhooks/events.js';
import type { EventLog } from '../event-log.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { Query } from './query.js';
import { plantJson, postgresTime } from './webhooks.js';

/** The channel a sequencer run NOTIFYs on when it numbered events: streams everywhere wake. */
export const EVENTS_CHANNEL = 'plantstore_events';

/** The advisory lock sequencer runs take in turn: 'plantevt' in ASCII. */
const SEQUENCER_LOCK = '8100956956759783028';

/**
 * The event of a plant write, as a CTE of the write's own statement: the plant from the CTE
 * `source` as its data, queued for the sequencer. One row, no lock, no NOTIFY.
 */
export const queueCte = (event: WebhookEvent, source: string, at: string): string =>
  `queued AS (
    INSERT INTO plant_event_queue (type, at, data)
    SELECT '${event}', ${at}, ${plantJson('s')} FROM ${source} s)`;

// One run of the sequencer. `locked` takes the lock before `batch` reads the queue (a one-time
// filter, evaluated before the scan), so every nextval of this run follows the commit of the
// run before; `moved` skips the rows that run moved already (deleted since this statement's
// snapshot), and takes the others out of the queue by their keys. NOTIFY only when it
// numbered any.
const SEQUENCE = `WITH locked AS MATERIALIZED (
    SELECT true AS held FROM (SELECT pg_advisory_xact_lock(${SEQUENCER_LOCK})) l),
  batch AS MATERIALIZED (
    SELECT id FROM plant_event_queue WHERE (SELECT held FROM locked) ORDER BY id LIMIT $1),
  moved AS (
    DELETE FROM plant_event_queue WHERE id = ANY(ARRAY(SELECT id FROM batch))
    RETURNING id, type, at, data),
  logged AS (
    INSERT INTO plant_events (position, type, at, data)
    SELECT nextval('plant_event_positions'), type, at, data FROM moved ORDER BY id
    RETURNING 1),
  notified AS (
    SELECT pg_notify('${EVENTS_CHANNEL}', '') FROM (SELECT 1 FROM logged LIMIT 1) l)
  SELECT (SELECT count(*) FROM logged) AS sequenced, (SELECT count(*) FROM notified) AS notified`;

// A page and the horizon, in one snapshot: a prune commits its deletes and its horizon
// together, so a page never lacks an event without the horizon saying so.
const READ = `SELECT h.pruned_through AS horizon, e.position, e.type, e.at, e.data
  FROM plant_event_horizon h LEFT JOIN LATERAL (
    SELECT position, type, at, data FROM plant_events
    WHERE position > coalesce($1::bigint, h.pruned_through) ORDER BY position LIMIT $2) e ON true`;

const HEAD = `SELECT greatest(
    (SELECT max(position) FROM plant_events), (SELECT pruned_through FROM plant_event_horizon))
  AS head`;

// The oldest events, a prefix in position order up to the first one young enough to keep;
// then the horizon up to the highest deleted. By their keys (= ANY(ARRAY(...))), which only
// the primary key answers.
const PRUNE = `WITH oldest AS MATERIALIZED (
    SELECT position, at FROM plant_events ORDER BY position LIMIT $2),
  kept AS (SELECT min(position) AS position FROM oldest WHERE at >= $1),
  gone AS (
    DELETE FROM plant_events WHERE position = ANY(ARRAY(
      SELECT position FROM oldest
      WHERE position < coalesce((SELECT position FROM kept), 9223372036854775807)))
    RETURNING position),
  moved AS (
    UPDATE plant_event_horizon
    SET pruned_through = greatest(pruned_through, (SELECT max(position) FROM gone))
    WHERE EXISTS (SELECT 1 FROM gone))
  SELECT count(*) AS deleted FROM gone`;

interface EventRow {
  horizon: bigint;
  position: bigint | null;
  type: WebhookEvent;
  at: unknown;
  data: string;
}

/**
 * The log on PostgreSQL. `queued` is fired by this process's plant writes (each queues an
 * event), `appended` by its sequencer runs that numbered events and by the NOTIFY of any
 * process's (`listen` starts the LISTEN connection on first use).
 */
export function postgresEventLog(
  query: Query,
  queued: MessageSignal,
  appended: MessageSignal,
  listen: () => void,
): EventLog {
  return {
    async read(after, limit) {
      const { rows } = await query<EventRow>('events.read', READ, [
        after === undefined ? null : after.toString(),
        limit,
      ]);
      const events: ChangeEvent[] = [];
      for (const row of rows) {
        if (row.position === null) continue;
        events.push({
          position: row.position,
          type: row.type,
          at: postgresTime(row.at),
          data: row.data,
        });
      }
      // In order as read; sorted all the same, as a join's output order is not promised.
      events.sort((a, b) => (a.position < b.position ? -1 : 1));
      return { events, horizon: rows[0]!.horizon };
    },
    async head() {
      const { rows } = await query<{ head: bigint | null }>('events.head', HEAD, []);
      return rows[0]?.head ?? 0n;
    },
    async prune(before, batch) {
      const { rows } = await query<{ deleted: bigint }>('events.prune', PRUNE, [before, batch]);
      return Number(rows[0]?.deleted ?? 0);
    },
    async sequence(batch) {
      const { rows } = await query<{ sequenced: bigint }>('events.sequence', SEQUENCE, [batch]);
      const sequenced = Number(rows[0]?.sequenced ?? 0);
      if (sequenced > 0) appended.fire();
      return sequenced;
    },
    onAppended(listener) {
      listen();
      return appended.on(listener);
    },
    onUnsequenced: (listener) => queued.on(listener),
  };
}
