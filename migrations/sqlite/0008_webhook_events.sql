-- The events of plant writes, recorded once each, and fanned out into one message per
-- endpoint after the write's commit.
--
-- Before this, a plant write inserted one webhook_messages row per subscribed endpoint in its
-- own transaction: 5,000 endpoints made every create write 5,000 rows, and creates fell from
-- 35,000 a second to 111. Now a write adds one row here, in its own savepoint (so an answered
-- write has its event, durably, and a failed one none), and only when an enabled endpoint
-- subscribes to its event type; the fan-out (src/service/webhook-fanout.ts) turns a batch of
-- events into at most 1,000 messages a transaction, and deletes them
-- (src/store/sqlite/webhook-events.ts). Times are Unix milliseconds.
--
-- Which endpoints an event goes to: those created before the write, enabled and subscribed to
-- the event type when the fan-out runs. "Created before the write" is `endpoint_max`, the
-- highest endpoint id when the write ran: writes take turns on SQLite, so every endpoint up to
-- it was there. `fanned_to`: the endpoint id the messages written so far reach (endpoint ids
-- start at 1), so that an event for more endpoints than one fan-out writes is taken up again
-- where it stopped.
CREATE TABLE webhook_events (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  event_type   TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  endpoint_max INTEGER NOT NULL,
  fanned_to    INTEGER NOT NULL DEFAULT 0
);

-- Whether any enabled endpoint subscribes to an event type, as every write asks: the highest
-- id in one of these, one index entry read however many endpoints there are. The predicates
-- are those of the writes' statements (src/store/sqlite/webhooks.ts), word for word, or the
-- planner would not use them.
CREATE INDEX webhook_endpoints_plant_created ON webhook_endpoints (id)
  WHERE enabled AND instr(' ' || events || ' ', ' plant.created ') > 0;
CREATE INDEX webhook_endpoints_plant_updated ON webhook_endpoints (id)
  WHERE enabled AND instr(' ' || events || ' ', ' plant.updated ') > 0;
CREATE INDEX webhook_endpoints_plant_deleted ON webhook_endpoints (id)
  WHERE enabled AND instr(' ' || events || ' ', ' plant.deleted ') > 0;
