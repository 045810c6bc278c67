-- The changes feed (GET /events): every plant write records one event, {position, type, at,
-- data}, in its own statement, and readers page and stream the events in position order.
--
-- The promise a reader relies on: positions are assigned in an order every reader sees the
-- same way, and a reader that has seen position p never later finds a new event below p.
-- A position drawn from a sequence by the write itself would break it: sequence values are
-- drawn when a statement runs and become visible when its transaction commits, and two writes
-- commit in either order. A reader paging while write A (position 7) is still committing and
-- write B (position 8) has committed reads 8, moves its cursor past 7, and never sees 7.
--
-- So a write does not choose its position. It appends its event to plant_event_queue (an
-- identity id, which orders nothing here) in a CTE of its own statement: the event commits
-- with the write or not at all, and a write pays for one small row, no lock and no NOTIFY
-- (whose lock at commit would make writes commit one at a time). After the commit, a
-- sequencer (in the writing process, woken by its commit; in every process, once a second,
-- for writes whose process died before it ran) moves the committed events from the queue into
-- plant_events, numbering them from plant_event_positions, in one statement that holds the
-- transaction-level advisory lock 'plantevt' (src/store/postgres/plant-events.ts):
--
-- 1. Sequencer runs take turns: each holds the lock from before it draws a position until
--    its commit. PostgreSQL makes a commit visible before it releases the transaction's
--    locks, so when run n+1 draws its first position, run n is committed and visible.
-- 2. Every position of run n+1 is greater than every position of run n: nextval is called
--    only under the lock (the CTE that takes it is MATERIALIZED and read by the batch before
--    the DELETE runs), and sequences never go back.
-- 3. A reader's snapshot that sees run n+1 committed was taken after that commit, so it sees
--    run n too (1.). What a reader can see is therefore always every position of runs 1..n and
--    none of the later ones: a reader that has seen position p has seen every position below
--    p that will ever exist. Gaps (a sequencer run that rolled back, the sequence's own) are
--    never filled later, for the same reason.
-- 4. No event is moved twice or lost: the statement's snapshot is taken before it waits for
--    the lock, so it may still see queue rows the previous run moved; its DELETE finds them
--    deleted by a committed transaction and skips them (READ COMMITTED re-checks a row
--    changed since the snapshot). Events committed after the snapshot stay in the queue for
--    the next run, which the writer's wake-up or the next second's run makes.
--
-- The alternative, a visibility watermark (readers stop below the oldest transaction still
-- running, pg_snapshot_xmin, with positions ordered by transaction id), needs no second
-- write, but any long transaction on the cluster (a pg_dump, a session idle in transaction,
-- another database's batch job) would hold back every stream for as long as it runs. The
-- sequencer's cost is one more statement per batch of events, off the write's path.
--
-- Retention: the maintenance loop deletes the oldest events past --events-retention, a prefix
-- in position order (never an event with an older one kept below it), and records the
-- highest position deleted in plant_event_horizon, in the same statement: a reader whose
-- cursor is below it may have missed events, and is answered 410 (41001).
CREATE TABLE plant_event_queue (
  id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type text        NOT NULL,
  at   timestamptz NOT NULL,
  data text        NOT NULL
);

-- Positions; CACHE 1 (the default), drawn under the sequencer's lock only.
CREATE SEQUENCE plant_event_positions AS bigint;

CREATE TABLE plant_events (
  position bigint      PRIMARY KEY,
  type     text        NOT NULL,
  at       timestamptz NOT NULL,
  data     text        NOT NULL
);

-- One row: every position up to pruned_through may have been deleted.
CREATE TABLE plant_event_horizon (
  one            boolean PRIMARY KEY DEFAULT true CHECK (one),
  pruned_through bigint  NOT NULL
);
INSERT INTO plant_event_horizon (pruned_through) VALUES (0);
