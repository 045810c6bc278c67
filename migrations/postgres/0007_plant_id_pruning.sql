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
-- So: `plant_ids_prune` deletes the ids at or below the sequence's value, a batch at a time,
-- run by every instance once a minute (src/service/maintenance.ts); the table holds the ids
-- claimed since the last prune and those clients took above the sequence.
--
-- A server create draws its id and claims it in one statement, but not at one instant: had a
-- prune read the sequence between the two and deleted a client's record of the drawn id, the
-- claim would succeed. So a server create holds the advisory lock below in shared mode from
-- before its draw to its commit (src/store/postgres/plant-statements.ts, INSERT_NEW), and the
-- prune takes it alone: when the prune reads the sequence, every id drawn is claimed or
-- refused already. A client create takes no lock: the ids it records at or below the
-- sequence are never drawn again, whether the prune deletes them or not.
--
-- A skip (a drawn id was taken) sets the sequence to the end of the run of taken ids it drew
-- into. It reads the sequence and sets it apart, so a skip can move it back past ids that
-- other creates drew in between; those are claimed and skipped in turn, as long as their
-- claims are kept. The prune therefore takes an advisory lock that skips take in shared mode:
-- when it reads the sequence's value W, no skip is half done, and every later skip reads a
-- value of at least W and sets one above it. No id at or below W is ever drawn again.

-- The skip's lock, 'plantids' in ASCII.
CREATE FUNCTION plant_ids_skip(drawn bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  -- At most 10,000 taken ids read by one skip, so that each statement stays short; a
  -- longer run is skipped by the next draw, which lands in it again.
  window_last bigint := least(drawn, 9223372036854775807 - 9999) + 9999;
  run_last bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM plant_ids_taken WHERE id = drawn) THEN
    -- A plant inserted by hand held the id: the draw has moved past it already.
    RETURN;
  END IF;
  -- The end of the run that starts at the drawn id: the first taken id from there on whose
  -- successor is not taken. Index probes, one per id of the run.
  SELECT t.id INTO run_last FROM plant_ids_taken t
  WHERE t.id >= drawn AND t.id <= window_last
    AND CASE WHEN t.id = 9223372036854775807 THEN true
      ELSE NOT EXISTS (SELECT 1 FROM plant_ids_taken n WHERE n.id = t.id + 1) END
  ORDER BY t.id LIMIT 1;
  PERFORM pg_advisory_xact_lock_shared(8100956956760040563);
  PERFORM setval('plant_id_seq', coalesce(run_last, window_last)) FROM plant_id_seq
  WHERE last_value < coalesce(run_last, window_last);
END $$;

-- Deletes up to `batch` ids at or below the sequence's value and above `above` (where the
-- caller's previous batch ended, so that no batch walks the index entries of the ones before
-- it); answers how many it deleted and the last of them.
CREATE FUNCTION plant_ids_prune(above bigint, batch integer)
RETURNS TABLE (deleted integer, last bigint) LANGUAGE plpgsql AS $$
DECLARE
  safe bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(8100956956760040563);
  SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO safe
  FROM plant_id_seq;
  RETURN QUERY WITH gone AS (
    DELETE FROM plant_ids_taken WHERE id IN (
      SELECT id FROM plant_ids_taken WHERE id > above AND id <= safe ORDER BY id LIMIT batch)
    RETURNING id)
  SELECT count(*)::integer, max(id) FROM gone;
END $$;
