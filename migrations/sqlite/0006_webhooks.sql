-- Webhooks: the endpoints that subscribe to plant changes, the messages written for them
-- (a transactional outbox: in the same transaction as the change), and the log of every
-- attempt at sending one. Times are Unix milliseconds. SQLite does not enforce foreign
-- keys here (the pragma is off), so the store deletes a message's attempts itself.

-- `secret` signs every message; `previous_secret` signs beside it until
-- `previous_until` after a rotation. `events`: space-separated names. `failing_since`:
-- the first failed attempt since the last delivered one (NULL while none failed), for
-- disabling an endpoint that only fails.
CREATE TABLE webhook_endpoints (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  url             TEXT    NOT NULL,
  events          TEXT    NOT NULL,
  description     TEXT,
  enabled         INTEGER NOT NULL DEFAULT 1,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  secret          TEXT    NOT NULL,
  previous_secret TEXT,
  previous_until  INTEGER,
  failing_since   INTEGER
);

-- One message to one endpoint. `webhook_id` is the `webhook-id` header, the same on
-- every attempt. A pending message is due at `next_attempt_at`; a process sending it
-- holds it until `lease_until`. `attempts` counts the claims made so far, less those
-- given back unattempted.
CREATE TABLE webhook_messages (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id     INTEGER NOT NULL,
  webhook_id      TEXT    NOT NULL UNIQUE,
  event_type      TEXT    NOT NULL,
  payload         TEXT    NOT NULL,
  status          TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  lease_until     INTEGER,
  completed_at    INTEGER
);

CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at)
  WHERE status = 'pending';
CREATE INDEX webhook_messages_by_endpoint ON webhook_messages (endpoint_id, id);
CREATE INDEX webhook_messages_completed ON webhook_messages (completed_at)
  WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id       INTEGER NOT NULL,
  at               INTEGER NOT NULL,
  duration_ms      INTEGER NOT NULL,
  http_status      INTEGER,
  error            TEXT,
  response_excerpt TEXT    NOT NULL
);

CREATE INDEX webhook_attempts_by_message ON webhook_attempts (message_id, id);
