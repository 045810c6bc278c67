-- Server-assigned ids come from a counter of their own instead of AUTOINCREMENT, which goes
-- above the largest id ever stored: once a client took 9223372036854775807, no id was left
-- for anyone. Writes are one at a time (BEGIN IMMEDIATE), so the counter is cheap and a
-- create reads it exactly. `last` is the last id handed out or skipped; the next server
-- create takes the first id above it that is not taken. (plants keeps its AUTOINCREMENT
-- column: every insert now gives the id, and SQLite only keeps its record of the largest.)
CREATE TABLE plant_id_counter (
  only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
  last     INTEGER NOT NULL
);

-- The ids clients took above the counter, kept after their plant is deleted: the counter
-- skips them, so a server-assigned id is never one a plant has or once had. Ids at or below
-- the counter are never handed out again and need no record.
CREATE TABLE plant_ids_taken (id INTEGER PRIMARY KEY);

-- Where the counter starts. Every id a plant had so far is at most the largest one SQLite
-- recorded, so right above it; unless a client took an id at or above 2^62 (up to
-- 9223372036854775807, where no id was left for anyone). Ids that high are a client's doing:
-- counting from 1, the server would have needed 2^62 creates to get there. Then the counter
-- starts above the largest id below 2^62 that the plants or the audit trail know of, and the
-- ids they know of above that are recorded as taken, to be skipped.
INSERT INTO plant_id_counter (only_row, last)
SELECT 1, CASE WHEN high < 4611686018427387904 THEN high
  ELSE max(
    coalesce((SELECT max(id) FROM plants WHERE id BETWEEN 0 AND 4611686018427387903), 0),
    coalesce((SELECT max(plant_id) FROM audit_log
      WHERE plant_id BETWEEN 0 AND 4611686018427387903), 0))
  END
FROM (SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'plants'), 0) AS high);

INSERT INTO plant_ids_taken (id)
SELECT id FROM plants WHERE id > (SELECT last FROM plant_id_counter)
UNION SELECT plant_id FROM audit_log WHERE plant_id > (SELECT last FROM plant_id_counter);
