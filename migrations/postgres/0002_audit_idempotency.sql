-- The audit trail: one row per plant write, written by the write's own statement, so an
-- answered write always has its row. `before_*` is empty on a create and `after_*` on a
-- delete (a plant's name is never NULL, so a NULL name means "no plant"). Rows are kept
-- until an operator deletes them.
CREATE TABLE audit_log (
  seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL,
  action      text        NOT NULL CHECK (action IN ('create', 'update', 'delete')),
  plant_id    bigint      NOT NULL,
  token_id    bigint,
  request_id  text,
  before_name text,
  before_tag  text,
  after_name  text,
  after_tag   text
);

CREATE INDEX audit_by_plant ON audit_log (plant_id, seq);
CREATE INDEX audit_by_time ON audit_log (at);

-- Idempotency-Key records of POST /plants, per token. `status` is NULL while the first
-- request is in flight (held until `lease_until`), then the answer it got: 201 with the
-- plant created, or the error code and message of a refusal.
CREATE TABLE idempotency_keys (
  token_id      bigint      NOT NULL,
  key           text        NOT NULL,
  fingerprint   text        NOT NULL,
  created_at    timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL,
  lease_until   timestamptz NOT NULL,
  status        integer,
  plant_id      bigint,
  plant_name    text,
  plant_tag     text,
  error_code    integer,
  error_message text,
  PRIMARY KEY (token_id, key)
);

CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
