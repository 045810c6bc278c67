import type Database from 'better-sqlite3';
import type { FanOutStep, WebhookEvents } from '../store.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites } from './query.js';

// The fan-out of recorded events into messages (see WebhookEvents), in one write of the
// group commit: SQLite runs one write transaction at a time across every process on the
// file, so no two fan-outs take the same event, and a fan-out's messages and the deletion of
// its events commit together. The events whose messages all fit are written by one
// statement and deleted by another, whatever their number; only the one cut off by the
// bound is written alone.

/** Whether the enabled endpoint `e` subscribes to the event `ev` and follows its write. */
const TARGET = `e.id > ev.fanned_to AND e.id <= ev.endpoint_max AND e.enabled
  AND instr(' ' || e.events || ' ', ' ' || ev.event_type || ' ') > 0`;

/**
 * The messages of the events a WHERE clause on `ev` picks, one per endpoint `e` it targets.
 * A webhook id is the event's time (12 hex digits of its Unix milliseconds) and 80 random
 * bits: unique as a random id is, and in time order, so each new id goes at the end of the
 * UNIQUE index instead of onto a random page of it; random ids made every commit write a
 * page of that index per message, more of them the more messages are kept.
 */
const WRITE_MESSAGES = `INSERT INTO webhook_messages
    (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
  SELECT e.id, printf('msg_%012x', ev.created_at) || lower(hex(randomblob(10))),
    ev.event_type, ev.payload,
    ev.created_at, ev.created_at
  FROM webhook_events ev JOIN webhook_endpoints e ON ${TARGET}`;

interface EventRow {
  id: bigint;
  /** Messages it has still to get. */
  targets: bigint;
}

function prepare(db: Database.Database) {
  return {
    enabled: db.prepare('SELECT count(*) FROM webhook_endpoints WHERE enabled').pluck(),
    oldest: db.prepare(
      `SELECT ev.id, (SELECT count(*) FROM webhook_endpoints e WHERE ${TARGET}) AS targets
       FROM webhook_events ev ORDER BY ev.id LIMIT ?`,
    ),
    // The messages of every event up to @last (the oldest, whose messages all fit).
    writeAll: db.prepare(`${WRITE_MESSAGES} WHERE ev.id <= @last ORDER BY ev.id, e.id`),
    finishAll: db.prepare('DELETE FROM webhook_events WHERE id <= ?'),
    // The first @limit messages still to write of the event @id, in endpoint order.
    writeSome: db.prepare(
      `${WRITE_MESSAGES} WHERE ev.id = @id ORDER BY e.id LIMIT @limit RETURNING endpoint_id`,
    ),
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
 * The oldest events, as many as `maxMessages` allow if every enabled endpoint took each: those
 * whose messages all fit in `maxMessages`, in id order, then the next one cut off where they
 * are spent (it keeps where its messages reached).
 */
function fanOut(s: Statements, maxMessages: number): FanOutStep {
  const enabled = Number(s.enabled.get() as bigint);
  const batch = s.oldest.all(
    Math.max(1, Math.floor(maxMessages / Math.max(1, enabled))),
  ) as EventRow[];
  let left = maxMessages;
  let whole = 0;
  while (whole < batch.length && Number(batch[whole]!.targets) <= left) {
    left -= Number(batch[whole]!.targets);
    whole += 1;
  }
  if (whole > 0) {
    const last = batch[whole - 1]!.id;
    s.writeAll.run({ last });
    s.finishAll.run(last);
  }
  const cut = batch[whole];
  if (cut !== undefined && left > 0) {
    const written = s.writeSome.all({ id: cut.id, limit: left }) as { endpoint_id: bigint }[];
    const reached = written.reduce(
      (max, { endpoint_id }) => (endpoint_id > max ? endpoint_id : max),
      0n,
    );
    s.advance.run(reached, cut.id);
    left -= written.length;
  }
  return { events: batch.length, finished: whole, messages: maxMessages - left };
}
