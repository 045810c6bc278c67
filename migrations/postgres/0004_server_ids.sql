-- Server-assigned ids come from a sequence instead of the one counter row plant_ids, which
-- every create locked until its commit was on disk (creates took turns, issue #13). nextval
-- takes no lock that lasts and is never rolled back: creates on every instance draw ids at
-- once. CACHE 1 hands the values out in order whichever connection draws them, and loses
-- none when a connection closes: ids stay dense but for creates that failed.
CREATE SEQUENCE plant_id_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- Every id a plant was given from here on, by the server or by a client; rows are never
-- deleted. Its primary key decides which create gets an id: a server create claims the id it
-- drew by inserting it here first, so it never gets an id that a plant has or once had,
-- however recently a client took it and deleted it again, on any instance (the sequence
-- moves past such ids). A client create inserts its id here before its plant, as the server
-- creates do, so the two take locks in the same order and cannot deadlock.
CREATE TABLE plant_ids_taken (id bigint PRIMARY KEY);

-- Where the sequence starts. Every id a plant had so far is at most plant_ids.high, so right
-- above it; unless a client took an id at or above 2^62 and high went there with it (up to
-- 9223372036854775807, where the old counter had no id left for anyone). Ids that high are a
-- client's doing: counting from 1, the server would have needed 2^62 creates to get there.
-- Then the sequence starts above the largest id below 2^62 that the plants or the audit
-- trail know of, and the ids they know of above that are recorded as taken, to be skipped.
WITH start AS (
    SELECT CASE WHEN high < 4611686018427387904 THEN high + 1
      ELSE 1 + coalesce(greatest(
        (SELECT max(id) FROM plants WHERE id BETWEEN 0 AND 4611686018427387903),
        (SELECT max(plant_id) FROM audit_log WHERE plant_id BETWEEN 0 AND 4611686018427387903)),
        0)
      END AS id
    FROM plant_ids),
  recorded AS (
    INSERT INTO plant_ids_taken (id)
    SELECT id FROM plants WHERE id >= (SELECT id FROM start)
    UNION SELECT plant_id FROM audit_log WHERE plant_id >= (SELECT id FROM start))
SELECT setval('plant_id_seq', id, false) FROM start;

-- An instance of an older version still running would assign ids from here without a word
-- to the sequence: without the table, its creates without an id fail instead.
DROP TABLE plant_ids;
