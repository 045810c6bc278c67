-- The skip (0007_plant_id_pruning) reads the run of taken ids it skips a window of 64 ids at
-- a time. It read the whole window of 10,000 in one query, in index order when the table's
-- statistics were current; after an import of many client ids, before autovacuum analysed the
-- table, the planner took the range for a hundred rows and chose a bitmap scan and a sort of
-- all of them: a skip cost 580 µs instead of 30. A window of 64 costs little on any plan.
-- Nothing else changes: the same run end, the same cap, the same lock.
CREATE OR REPLACE FUNCTION plant_ids_skip(drawn bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  -- At most 10,000 taken ids read by one skip, so that each statement stays short; a
  -- longer run is skipped by the next draw, which lands in it again.
  window_last bigint := least(drawn, 9223372036854775807 - 9999) + 9999;
  run_last bigint;
  read_to bigint;
  taken bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM plant_ids_taken WHERE id = drawn) THEN
    -- A plant inserted by hand held the id: the draw has moved past it already.
    RETURN;
  END IF;
  -- The end of the run that starts at the drawn id: the taken ids from there on, read in
  -- order, 64 at a time, until the first gap. A loop, not one query: the planner answers "the
  -- first id whose successor is not taken" by hashing the whole table.
  run_last := drawn;
  LOOP
    read_to := run_last + least(window_last - run_last, 64);
    FOR taken IN SELECT id FROM plant_ids_taken
        WHERE id > run_last AND id <= read_to ORDER BY id LOOP
      EXIT WHEN taken <> run_last + 1;
      run_last := taken;
    END LOOP;
    -- A gap in this window, or the cap.
    EXIT WHEN run_last < read_to OR run_last >= window_last;
  END LOOP;
  PERFORM pg_advisory_xact_lock_shared(8100956956760040563);
  PERFORM setval('plant_id_seq', run_last) FROM plant_id_seq WHERE last_value < run_last;
END $$;
