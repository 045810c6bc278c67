import type Database from 'better-sqlite3';
import type { ChangeEvent } from '../../core/change-events.js';
import { EVENT_COLUMNS, type EventRow, toChangeEvent } from '../event-rows.js';
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
import type { MessageSignal } from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites } from './query.js';
import { sqliteTime } from './webhooks.js';

// The fan-out of the log's events into messages (see WebhookEvents), in one write of the
// group commit: SQLite runs one write transaction at a time across every process on the
// file, so no two fan-outs give an endpoint the same event, and the log's head read in it is
// final (0010_changes_feed.sql).

interface EndpointRow {
  id: bigint;
  log_position: bigint;
  events: string;
  pending: bigint;
}

function prepare(db: Database.Database) {
  return {
    head: db.prepare('SELECT coalesce(max(seq), 0) FROM audit_log').pluck(),
    behind: db.prepare(
      `SELECT id, log_position, events, pending FROM webhook_endpoints
       WHERE ${WITH_ROOM} AND log_position < @head ORDER BY log_position LIMIT @limit`,
    ),
    // Full, its probes not all out, and none of its messages due before @soon (see
    // STALLED_AFTER_MS).
    stalled: db.prepare(
      `SELECT id, log_position, events, ${STALLED_PENDING} AS pending FROM webhook_endpoints e
       WHERE enabled AND pending >= ${MESSAGES_PER_ENDPOINT}
         AND pending < ${MESSAGES_PER_ENDPOINT + MAX_PROBES} AND log_position < @head
         AND NOT EXISTS (SELECT 1 FROM webhook_messages m
           WHERE m.endpoint_id = e.id AND m.status = 'pending' AND m.next_attempt_at <= @soon)
       ORDER BY log_position LIMIT @limit`,
    ),
    room: db.prepare(`SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE ${WITH_ROOM})`).pluck(),
    events: db.prepare(
      `SELECT ${EVENT_COLUMNS} FROM audit_log WHERE seq > @after AND seq <= @head
       ORDER BY seq LIMIT @limit`,
    ),
    write: db.prepare(
      `INSERT INTO webhook_messages
         (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
       VALUES (@endpointId, @webhookId, @type, @payload, @at, @at)`,
    ),
    move: db.prepare(
      'UPDATE webhook_endpoints SET log_position = @to, pending = pending + @n WHERE id = @id',
    ),
  };
}

type Statements = ReturnType<typeof prepare>;

/**
 * The fan-out on SQLite; `wakes` is fired by this process's plant writes, message ends and
 * endpoint changes, `messages` (the queue's signal) by a fan-out that wrote messages.
 */
export function sqliteWebhookEvents(
  db: Database.Database,
  batches: GroupCommit,
  wakes: MessageSignal<FanOutWake>,
  messages: MessageSignal,
): WebhookEvents {
  const write = batchedWrites(batches);
  const s = prepare(db);
  let lookedForStalled = -Infinity;
  return {
    async fanOut(maxMessages) {
      const now = Date.now();
      const stalled = now - lookedForStalled >= STALLED_LOOK_MS;
      if (stalled) lookedForStalled = now;
      const asked = performance.now();
      let waitedMs = 0;
      const step = await write(() => {
        waitedMs = performance.now() - asked;
        return fanOut(s, maxMessages, stalled ? now : undefined);
      });
      step.waitedMs = waitedMs;
      if (step.messages > 0) messages.fire();
      return step;
    },
    onEvents: (listener) => wakes.on(listener),
  };
}

/**
 * The endpoints furthest behind, each its fair part of `maxMessages`; with `now`, then the
 * stalled ones too (a message each) while fewer were planned (planFanOut).
 */
function fanOut(s: Statements, maxMessages: number, now?: number): FanOutStep {
  const head = s.head.get() as bigint;
  const limit = endpointsPerFanOut(maxMessages);
  // Endpoints at one position (most often all of them, at the head) read the log once.
  const read = new Map<string, ChangeEvent[]>();
  const readBehind = (row: EndpointRow, asked: number): ReadBehind => {
    const endpoint: LogEndpoint = {
      id: row.id,
      position: row.log_position,
      events: row.events,
      pending: Number(row.pending),
    };
    const key = `${endpoint.position} ${asked}`;
    let events = read.get(key);
    if (events === undefined) {
      const rows = s.events.all({ after: endpoint.position, head, limit: asked }) as EventRow[];
      events = rows.map((entry) => toChangeEvent(entry, sqliteTime));
      read.set(key, events);
    }
    return { endpoint, events, asked };
  };
  const behindRows = s.behind.all({ head, limit }) as EndpointRow[];
  const behind = behindRows.map((row) => readBehind(row, SCAN_PER_ENDPOINT));
  // Read before the behind ones' messages are written: one this fan-out fills is not stalled.
  const stalledRows =
    now === undefined
      ? []
      : (s.stalled.all({
          head,
          limit: maxMessages,
          soon: now + STALLED_AFTER_MS,
        }) as EndpointRow[]);
  const stalled = (function* () {
    for (const row of stalledRows) yield readBehind(row, STALLED_SCAN);
  })();
  let written = 0;
  const moves = planFanOut(behind, stalled, head, maxMessages);
  for (const move of moves) {
    for (const message of move.messages) s.write.run({ ...message, at: message.at.getTime() });
    s.move.run({ id: move.id, to: move.to, n: move.messages.length });
    written += move.messages.length;
  }
  return {
    endpoints: moves.length,
    messages: written,
    room: behind.length > 0 || s.room.get() === 1n,
  };
}
