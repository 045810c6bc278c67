-- The changes feed (GET /events) reads the audit trail: every plant write already records one
-- audit entry in its own statement (0002_audit_idempotency), with the plant before and after.
-- An event is that entry: its position is the entry's `seq`, its data the plant after the
-- write (before it, for a delete). So a write pays nothing more for the feed: no row, no
-- index entry, no lock. (A table of its own, one more row per write, cost a SQLite create 11%
-- more CPU, measured.)
--
-- The promise a reader relies on: positions come in an order every reader sees the same way,
-- and a reader that has seen position p never later finds a new event below p. `seq` alone
-- does not keep it: values are drawn from the identity sequence when a write runs and become
-- visible when it commits, and two writes commit in either order. A reader paging while write
-- A (seq 7) is still committing and write B (seq 8) has committed would read 8, move past 7,
-- and never see 7.
--
-- So readers read only up to a watermark W below which every seq is final (committed, or rolled
-- back for good), which each process works out for itself (src/store/postgres/plant-events.ts):
--
-- 1. It reads L, the last value the identity sequence of audit_log handed out
--    (pg_sequence_last_value: sequences are not transactional, so L counts the values drawn
--    by writes still running), and then, in the same statement, the transactions holding
--    RowExclusiveLock on audit_log (pg_locks, fast-path locks included).
-- 2. A write that drew a seq holds that lock from before the draw (the statement takes its
--    target tables' locks before it runs) until it ends. So every write that drew a seq <= L
--    had either ended when the locks were read, or is among the holders.
-- 3. Once every holder has ended (looked at again, every few ms), each seq <= L is final:
--    W = L. A commit is visible before its locks are released, so a reader's snapshot taken
--    after that sees every committed entry up to W; readers ask for `seq <= W`.
--
-- It needs the sequence to hand out one value at a time (CACHE 1, the identity default: with
-- a cache, a backend could draw a value below L from its cache after the locks were read),
-- and it waits for the writes of audit_log only, never for other transactions: the rejected
-- alternative, a snapshot's xmin (pg_snapshot_xmin) as the watermark, lets any long
-- transaction on the cluster (a pg_dump, a session idle in transaction, another database's
-- batch job) hold back every stream for as long as it runs.
--
-- Retention: the feed serves the entries of the last --events-retention (7 days); the
-- maintenance loop moves `position` below up over the older ones, a prefix in seq order, without
-- deleting them (the audit trail keeps its own retention, --audit-retention), and a prune of
-- the audit trail moves it up to the highest seq it deleted. A reader whose cursor is below it
-- may have missed events, and is answered 410 (41001).
CREATE TABLE event_horizon (
  one      boolean PRIMARY KEY DEFAULT true CHECK (one),
  position bigint  NOT NULL
);
INSERT INTO event_horizon (position) VALUES (0);
