-- Server-assigned ids: a skip that reads only the run it skips, and plant_ids_taken kept to
-- what the guarantee needs.
--
-- Why every server create still claims its id in plant_ids_taken (and SQLite's creates do
-- not): SQLite's writes take turns, so a create reads the taken ids as they are. Here a
-- create's statement reads them in a snapshot taken when the statement began. Should a client
-- create id X and delete it again, both committing after that snapshot but before the server's
-- create inserts its plant X, a check of the snapshot would not see the client's record of X,
-- nor would the insert into plants see a conflict (the client's row is dead by then): the
-- server would hand out an id a plant once had. An INSERT into plant_ids_taken checks its key
-- against every row committed or in progress, whatever the snapshot, so the claim is what
-- makes the guarantee hold across instances. It need not last, though: the sequence never
-- draws an id at or below its current value again, once skips cannot move it back (below).
--
-- So the ids at or below the sequence's value are deleted, a batch at a time, by every
-- instance once a minute (src/service/maintenance.ts, src/store/postgres/plant-ids.ts); the
-- table holds the ids claimed since the last prune and those clients took above the sequence.
-- A pass starts with `plant_ids_fence`, which answers the value W up to which it may delete;
-- the deletes run after it, outside any lock, so creates never wait for them.
--
-- A server create draws its id and claims it in one statement, but not at one instant: had a
-- fence read the sequence between the two and a prune deleted a client's record of the drawn
-- id, the claim would succeed. So a server create holds the advisory lock below in shared mode
-- from before its draw to its commit (src/store/postgres/plant-statements.ts, INSERT_NEW),
-- and the fence takes it alone, for an instant: when it reads W, every id drawn is claimed or
-- refused already. A client create takes no lock: the ids it records at or below W are never
-- drawn again, whether a prune deletes them or not.
--
-- A skip (a drawn id was taken) sets the sequence to the end of the run of taken ids it drew
-- into. It reads the sequence and sets it apart, so a skip can move it back past ids that
-- other creates drew in between; those are claimed and skipped in turn, as long as their
-- claims are kept. So skips take the lock in shared mode too, and compare with the sequence
-- only once they hold it: when the fence reads W, no skip is half done, and every later skip
-- reads a value of at least W and sets one above it. No id at or below W is ever drawn again,
-- and deleting their records, then or at any time later, changes no draw.

-- The skip's lock, 'plantids' in ASCII.
CREATE FUNCTION plant_ids_skip(drawn bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  -- At most 10,000 taken ids read by one skip, so that each statement stays short; a
  -- longer run is skipped by the next draw, which lands in it again.
  window_last bigint := least(drawn, 9223372036854775807 - 9999) + 9999;
  run_last bigint;
  taken bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM plant_ids_taken WHERE id = drawn) THEN
    -- A plant inserted by hand held the id: the draw has moved past it already.
    RETURN;
  END IF;
  -- The end of the run that starts at the drawn id: the taken ids from there on, read in
  -- order from the index until the first gap. A loop, not one query: the planner answers "the
  -- first id whose successor is not taken" by hashing the whole table.
  run_last := drawn;
  FOR taken IN SELECT id FROM plant_ids_taken
      WHERE id > drawn AND id <= window_last ORDER BY id LOOP
    EXIT WHEN taken <> run_last + 1;
    run_last := taken;
  END LOOP;
  PERFORM pg_advisory_xact_lock_shared(8100956956760040563);
  PERFORM setval('plant_id_seq', run_last) FROM plant_id_seq WHERE last_value < run_last;
END $$;

-- The value up to which a prune may delete (see above): the last id the sequence drew.
CREATE FUNCTION plant_ids_fence() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(8100956956760040563);
  RETURN (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM plant_id_seq);
END $$;
