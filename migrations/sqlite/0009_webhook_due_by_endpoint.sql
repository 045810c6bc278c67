-- A claim takes the due messages of each endpoint in turn, a few of each, so that one
-- endpoint's backlog (a receiver that hangs while thousands of messages wait for it) never
-- keeps another endpoint's messages from being claimed. It reads each enabled endpoint's
-- earliest due messages here, in the order it sends them (the rowid, id, ends every index),
-- and stops after those it takes. Pending messages only, as webhook_messages_due.
CREATE INDEX webhook_messages_due_by_endpoint
  ON webhook_messages (endpoint_id, next_attempt_at) WHERE status = 'pending';
