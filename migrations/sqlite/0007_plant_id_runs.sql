-- The ids clients took above the counter, kept as runs of consecutive ids instead of one row
-- each. A server create looked for the end of the run of taken ids right above the counter
-- with a window over every taken id at or above it: after a client import of 119,000 ids
-- above the counter, creates without an id were 86 times slower. With runs, a server create
-- reads one row by its key (is counter + 1 the first id of a run? then jump past its last),
-- and a client create merges its id with at most the runs on either side of it: O(log n)
-- whatever the number of ids clients took.
--
-- Invariants the store keeps (src/store/sqlite/plant-ids.ts): runs are disjoint and never
-- adjacent (first of one > last of the one before + 1), and lie wholly above the counter. A
-- run is deleted when the counter jumps past it, so the table holds at most one row per id a
-- client took above the counter, fewer when the ids touch; ids at or below the counter are
-- never handed out again and need no record.
CREATE TABLE plant_id_runs (
  first INTEGER PRIMARY KEY,
  last  INTEGER NOT NULL CHECK (last >= first)
);

-- Islands of consecutive ids: within one, id less its rank is the same.
INSERT INTO plant_id_runs (first, last)
SELECT min(id), max(id) FROM (
  SELECT id, id - row_number() OVER (ORDER BY id) AS island FROM plant_ids_taken
  WHERE id > (SELECT last FROM plant_id_counter))
GROUP BY island;

DROP TABLE plant_ids_taken;
