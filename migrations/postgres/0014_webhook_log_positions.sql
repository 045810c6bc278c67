-- Webhook messages come from the changes feed's log (the audit trail, 0011), each endpoint
-- reading it from a position of its own, instead of from an event every write recorded for
-- them (0009).
--
-- Why: with 0009 every write statement carried the outbox's CTE, and an endpoint that never
-- answered still got a message for every write: 1,000 such endpoints made every create cost
-- 1,000 rows to the fan-out (bench/HISTORY.md). Now a write records nothing for the webhooks:
-- its audit entry, which it writes anyway, is the event. The fan-out
-- (src/store/postgres/webhook-events.ts) gives an endpoint the events above its
-- `log_position` and up to the feed's watermark (0011: every seq below it is final, so no
-- event is passed while it commits) while the endpoint has fewer than 64 messages pending,
-- and moves its position over what it gave and what it passed (events of types it does not
-- subscribe to). An endpoint that does not answer keeps 64 messages pending and costs the
-- writes nothing more; the events it has yet to get wait in the log, as long as the audit
-- trail keeps them. Every process runs a fan-out: each moves an endpoint's position only from
-- where it read it (an UPDATE that checks it), so no two give an endpoint the same event.
--
-- `log_position` starts at the last seq drawn when the endpoint is created: it gets the
-- writes that draw theirs after it (one still committing that drew before is as if it came
-- first). It stays while the endpoint is disabled: enabled again, it gets what was written
-- meanwhile, but nothing below the feed's horizon (--events-retention, 0011). `pending`
-- counts its messages with status 'pending': the fan-out adds what it writes, the trigger
-- below follows every change of status (an attempt's end, a retry asked for), and deleting an
-- endpoint deletes its messages with it.

-- What the last fan-out of 0009 left: its events become messages as that fan-out would have
-- written them. The lock keeps an instance of the older version, still running, from
-- recording or fanning out an event meanwhile: it waits, then fails on the dropped table (stop
-- older instances before upgrading, see docs/postgresql-and-scale.md).
LOCK TABLE webhook_events IN ACCESS EXCLUSIVE MODE;

INSERT INTO webhook_messages
    (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
  SELECT e.id,
    'msg_' || lpad(to_hex(floor(extract(epoch FROM ev.created_at) * 1000)::bigint), 12, '0')
      || right(replace(gen_random_uuid()::text, '-', ''), 20),
    ev.event_type, ev.payload, ev.created_at, ev.created_at
  FROM webhook_events ev JOIN webhook_endpoints e
    ON e.id > ev.fanned_to AND e.id <= ev.endpoint_max AND e.enabled
      AND position(' ' || ev.event_type || ' ' IN ' ' || e.events || ' ') > 0
  ORDER BY ev.id, e.id;

DROP TABLE webhook_events;
DROP INDEX webhook_endpoints_plant_created;
DROP INDEX webhook_endpoints_plant_updated;
DROP INDEX webhook_endpoints_plant_deleted;

ALTER TABLE webhook_endpoints ADD COLUMN log_position bigint NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN pending integer NOT NULL DEFAULT 0;

UPDATE webhook_endpoints SET
  log_position = coalesce(pg_sequence_last_value(
    pg_get_serial_sequence('audit_log', 'seq')::regclass), 0),
  pending = (SELECT count(*) FROM webhook_messages m
             WHERE m.endpoint_id = webhook_endpoints.id AND m.status = 'pending');

-- The endpoints the fan-out may give messages to, most behind first; none, and a write needs
-- no fan-out at all. The predicate is the fan-out's, word for word (64: MESSAGES_PER_ENDPOINT
-- in src/store/webhook-rows.ts), or the planner would not use it.
CREATE INDEX webhook_endpoints_with_room ON webhook_endpoints (log_position)
  WHERE enabled AND pending < 64;

CREATE FUNCTION webhook_messages_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhook_endpoints
  SET pending = pending + (NEW.status = 'pending')::int - (OLD.status = 'pending')::int
  WHERE id = NEW.endpoint_id;
  RETURN NULL;
END $$;

CREATE TRIGGER webhook_messages_pending AFTER UPDATE OF status ON webhook_messages
  FOR EACH ROW WHEN (OLD.status <> NEW.status) EXECUTE FUNCTION webhook_messages_pending();
