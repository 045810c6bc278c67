import type Database from 'better-sqlite3';
import type { FanOutStep, WebhookEvents } from '../store.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites } from './query.js';

// The fan-out of recorded events into messages (see WebhookEvents), in one write of the
// group commit: SQLite runs one write transaction at a time across every process on the
// file, so no two fan-outs take the same event, and a fan-out's messages and the deletion of
// its events commit together.

interface EventRow {
  id: bigint;
  event_type: string;
  payload: string;
  created_at: bigint;
  endpoint_max: bigint;
  fanned_to: bigint;
}

function prepare(db: Database.Database) {
  return {
    enabled: db.prepare('SELECT count(*) FROM webhook_endpoints WHERE enabled').pluck(),
    oldest: db.prepare(
      `SELECT id, event_type, payload, created_at, endpoint_max, fanned_to FROM webhook_events
       ORDER BY id LIMIT ?`,
    ),
    // The event's messages to the endpoints after `fanned_to`, in id order, at most @limit.
    write: db.prepare(
      `INSERT INTO webhook_messages
         (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
       SELECT id, 'msg_' || lower(hex(randomblob(16))), @type, @payload, @at, @at
       FROM webhook_endpoints
       WHERE id > @after AND id <= @last AND enabled
         AND instr(' ' || events || ' ', ' ' || @type || ' ') > 0
       ORDER BY id LIMIT @limit
       RETURNING endpoint_id`,
    ),
    // Whether the event has a message still to write after the endpoint @after.
    more: db.prepare(
      `SELECT 1 FROM webhook_endpoints
       WHERE id > @after AND id <= @last AND enabled
         AND instr(' ' || events || ' ', ' ' || @type || ' ') > 0
       LIMIT 1`,
    ),
    finish: db.prepare('DELETE FROM webhook_events WHERE id = ?'),
    advance: db.prepare('UPDATE webhook_events SET fanned_to = ? WHERE id = ?'),
  };
}

type Statements = ReturnType<typeof prepare>;

/**
 * The events of plant writes on SQLite; `events` is fired by the plant writes of this
 * process, `messages` (the queue's signal) by a fan-out that wrote messages.
 */
export function sqliteWebhookEvents(
  db: Database.Database,
  batches: GroupCommit,
  events: MessageSignal,
  messages: MessageSignal,
): WebhookEvents {
  const write = batchedWrites(batches);
  const s = prepare(db);
  return {
    async fanOut(maxMessages) {
      const step = await write(() => fanOut(s, maxMessages));
      if (step.messages > 0) messages.fire();
      return step;
    },
    onEvents: (listener) => events.on(listener),
  };
}

/**
 * The oldest events, as many as `maxMessages` allow if every enabled endpoint took each,
 * each written until `maxMessages` are: an event cut off keeps where its messages reached.
 */
function fanOut(s: Statements, maxMessages: number): FanOutStep {
  const enabled = Number(s.enabled.get() as bigint);
  const batch = s.oldest.all(Math.max(1, Math.floor(maxMessages / Math.max(1, enabled))));
  let left = maxMessages;
  let finished = 0;
  for (const event of batch as EventRow[]) {
    if (left === 0) break;
    const target = {
      type: event.event_type,
      after: event.fanned_to,
      last: event.endpoint_max,
    };
    const written = s.write.all({
      ...target,
      payload: event.payload,
      at: event.created_at,
      limit: left,
    }) as { endpoint_id: bigint }[];
    const reached = written.reduce(
      (max, { endpoint_id }) => (endpoint_id > max ? endpoint_id : max),
      0n,
    );
    if (written.length < left || s.more.get({ ...target, after: reached }) === undefined) {
      s.finish.run(event.id);
      finished += 1;
    } else {
      s.advance.run(reached, event.id);
    }
    left -= written.length;
  }
  return { events: batch.length, finished, messages: maxMessages - left };
}
