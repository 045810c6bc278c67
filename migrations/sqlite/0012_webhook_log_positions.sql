-- Webhook messages come from the changes feed's log (the audit trail, 0010), each endpoint
-- reading it from a position of its own, instead of from an event every write recorded for
-- them (0008).
--
-- Why: with 0008 a write paid for the webhooks (the event row, its fan-out into a message per
-- endpoint), and an endpoint that never answered still got a message for every write: 1,000
-- such endpoints made every create write 1,000 rows, and creates ran at 0.60x those of a
-- store with none (bench/HISTORY.md). Now a write records nothing for the webhooks: its audit
-- entry, which it writes anyway, is the event. The fan-out (src/store/sqlite/webhook-events.ts)
-- gives an endpoint the events above its `log_position` while it has fewer than 64 messages
-- pending, and moves its position over what it gave and what it passed (events of types it
-- does not subscribe to). An endpoint that does not answer keeps 64 messages pending and costs
-- the writes nothing more; the events it has yet to get wait in the log, as long as the audit
-- trail keeps them.
--
-- `log_position` starts at the log's head when the endpoint is created (it gets the writes
-- after it), and stays while it is disabled: enabled again, it gets what was written
-- meanwhile, but nothing below the feed's horizon (--events-retention, 0010). `pending`
-- counts its messages with status 'pending': the fan-out adds what it writes, the trigger
-- below follows every change of status (an attempt's end, a retry asked for), and deleting an
-- endpoint deletes its messages with it.

-- What the last fan-out of 0008 left: its events become messages as that fan-out would have
-- written them.
INSERT INTO webhook_messages
    (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
  SELECT e.id, printf('msg_%012x', ev.created_at) || lower(hex(randomblob(10))),
    ev.event_type, ev.payload, ev.created_at, ev.created_at
  FROM webhook_events ev JOIN webhook_endpoints e
    ON e.id > ev.fanned_to AND e.id <= ev.endpoint_max AND e.enabled
      AND instr(' ' || e.events || ' ', ' ' || ev.event_type || ' ') > 0
  ORDER BY ev.id, e.id;

DROP TABLE webhook_events;
DROP INDEX webhook_endpoints_plant_created;
DROP INDEX webhook_endpoints_plant_updated;
DROP INDEX webhook_endpoints_plant_deleted;

ALTER TABLE webhook_endpoints ADD COLUMN log_position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;

UPDATE webhook_endpoints SET
  log_position = (SELECT coalesce(max(seq), 0) FROM audit_log),
  pending = (SELECT count(*) FROM webhook_messages m
             WHERE m.endpoint_id = webhook_endpoints.id AND m.status = 'pending');

-- The endpoints the fan-out may give messages to, most behind first; none, and a write needs
-- no fan-out at all. The predicate is the fan-out's, word for word (64: MESSAGES_PER_ENDPOINT
-- in src/store/webhook-rows.ts), or the planner would not use it.
CREATE INDEX webhook_endpoints_with_room ON webhook_endpoints (log_position)
  WHERE enabled AND pending < 64;

CREATE TRIGGER webhook_messages_pending AFTER UPDATE OF status ON webhook_messages
  WHEN OLD.status <> NEW.status
BEGIN
  UPDATE webhook_endpoints
  SET pending = pending + (NEW.status = 'pending') - (OLD.status = 'pending')
  WHERE id = NEW.endpoint_id;
END;
