-- The changes feed (GET /events): every plant write records one event, {position, type, at,
-- data}, in its own savepoint, so the event commits with the write or not at all. Times are
-- Unix milliseconds.
--
-- The position is the row's id, assigned as the write runs. On SQLite that is also the order
-- in which the writes commit: a write transaction holds the database's one write lock from
-- BEGIN IMMEDIATE to COMMIT, across processes too (serve --workers), so a transaction that
-- starts after another's commit draws higher ids, and a reader (one snapshot per statement, in
-- WAL mode) sees a prefix of the commits: every position below one it sees. AUTOINCREMENT, so
-- that a position is never used twice, also after every event has been pruned.
--
-- Retention: the maintenance loop deletes the oldest events past --events-retention, a prefix
-- in position order, and records the highest position deleted in plant_event_horizon in the
-- same transaction: a reader whose cursor is below it may have missed events, and is answered
-- 410 (41001).
CREATE TABLE plant_events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  type     TEXT    NOT NULL,
  at       INTEGER NOT NULL,
  data     TEXT    NOT NULL
);

CREATE TABLE plant_event_horizon (
  one            INTEGER PRIMARY KEY CHECK (one = 1),
  pruned_through INTEGER NOT NULL
);
INSERT INTO plant_event_horizon (one, pruned_through) VALUES (1, 0);
