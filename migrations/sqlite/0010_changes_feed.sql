-- The changes feed (GET /events) reads the audit trail: every plant write already records one
-- audit entry in its own savepoint (0002_audit_idempotency), with the plant before and after.
-- An event is that entry: its position is the entry's `seq`, its data the plant after the
-- write (before it, for a delete). So a write pays nothing more for the feed.
--
-- On SQLite `seq` is also the order in which the writes commit: a write transaction holds the
-- database's one write lock from BEGIN IMMEDIATE to COMMIT, across processes too (serve
-- --workers), so a transaction that starts after another's commit draws higher values, and a
-- reader (one snapshot per statement, in WAL mode) sees a prefix of the commits: every seq
-- below one it sees. AUTOINCREMENT (0002) keeps a seq from being used twice.
--
-- Retention: the feed serves the entries of the last --events-retention (7 days); the
-- maintenance loop moves `position` below up over the older ones, a prefix in seq order, without
-- deleting them (the audit trail keeps its own retention, --audit-retention), and a prune of
-- the audit trail moves it up to the highest seq it deleted. A reader whose cursor is below it
-- may have missed events, and is answered 410 (41001).
CREATE TABLE event_horizon (
  one      INTEGER PRIMARY KEY CHECK (one = 1),
  position INTEGER NOT NULL
);
INSERT INTO event_horizon (one, position) VALUES (1, 0);
