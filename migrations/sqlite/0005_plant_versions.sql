-- Every plant gets a version, its entity tag (ETag): a new one with every write of the
-- plant, so that a client can tell whether it changed, and never one an earlier plant of
-- the same id had. SQLite has no sequences: a version is 64 random bits (random()), which
-- two versions of one plant share with a chance of 2^-64. The tag used to be a SHA-256 of
-- the plant, computed on every answer; a number read with the row costs nothing.
--
-- The column's default is random() for every insert, also those of code that does not know
-- versions (an older instance during an upgrade, an operator). SQLite adds a column only
-- with a constant default: the table is built anew, its AUTOINCREMENT record kept.
CREATE TABLE plants_versioned (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  name    TEXT    NOT NULL,
  tag     TEXT,
  version INTEGER NOT NULL DEFAULT (random())
);

INSERT INTO plants_versioned (id, name, tag) SELECT id, name, tag FROM plants;

DELETE FROM sqlite_sequence WHERE name = 'plants_versioned';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'plants_versioned', seq FROM sqlite_sequence WHERE name = 'plants';

DROP TABLE plants;
ALTER TABLE plants_versioned RENAME TO plants;

CREATE INDEX plants_by_tag ON plants (tag, id) WHERE tag IS NOT NULL;

-- plantstore writes a new version itself with every change; a change that keeps the
-- version (an older instance, an operator's UPDATE) gets one here.
CREATE TRIGGER plants_new_version AFTER UPDATE OF name, tag ON plants
FOR EACH ROW WHEN NEW.version = OLD.version
BEGIN
  UPDATE plants SET version = random() WHERE id = NEW.id;
END;

-- A created plant's answer, kept for its Idempotency-Key, keeps its version: a retry gets the
-- same entity tag. Answers kept before this version take the plant's version if it is
-- unchanged since; the others keep none, and replay an entity tag no plant has.
ALTER TABLE idempotency_keys ADD COLUMN plant_version INTEGER;

UPDATE idempotency_keys SET plant_version = (
  SELECT p.version FROM plants p
  WHERE p.id = idempotency_keys.plant_id AND p.name = idempotency_keys.plant_name
    AND p.tag IS idempotency_keys.plant_tag)
WHERE status = 201;
