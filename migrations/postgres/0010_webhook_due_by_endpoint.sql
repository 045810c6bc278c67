-- A claim takes the due messages of each endpoint in turn, a few of each, so that one
-- endpoint's backlog (a receiver that hangs while thousands of messages wait for it) never
-- keeps another endpoint's messages from being claimed. It reads each enabled endpoint's
-- earliest due messages here, in the order it sends them, and stops after those it takes.
-- Pending messages only, as webhook_messages_due: the index holds the queue, not history.
CREATE INDEX webhook_messages_due_by_endpoint
  ON webhook_messages (endpoint_id, next_attempt_at, id) WHERE status = 'pending';
