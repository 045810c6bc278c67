-- The audit trail: one row per plant write, written in the write's own transaction, so
-- an answered write always has its row. `before_*` is empty on a create and `after_*` on
-- a delete (a plant's name is never NULL, so a NULL name means "no plant"). Times are
-- Unix milliseconds. Rows are kept until an operator deletes them.
CREATE TABLE audit_log (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  action      TEXT    NOT NULL CHECK (action IN ('create', 'update', 'delete')),
  plant_id    INTEGER NOT NULL,
  token_id    INTEGER,
  request_id  TEXT,
  before_name TEXT,
  before_tag  TEXT,
  after_name  TEXT,
  after_tag   TEXT
);

CREATE INDEX audit_by_plant ON audit_log (plant_id, seq);
CREATE INDEX audit_by_time ON audit_log (at);

-- Idempotency-Key records of POST /plants, per token. `status` is NULL while the first
-- request is in flight (held until `lease_until`), then the answer it got: 201 with the
-- plant created, or the error code and message of a refusal.
CREATE TABLE idempotency_keys (
  token_id      INTEGER NOT NULL,
  key           TEXT    NOT NULL,
  fingerprint   TEXT    NOT NULL,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  lease_until   INTEGER NOT NULL,
  status        INTEGER,
  plant_id      INTEGER,
  plant_name    TEXT,
  plant_tag     TEXT,
  error_code    INTEGER,
  error_message TEXT,
  PRIMARY KEY (token_id, key)
);

CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
