-- Every plant gets a version, its entity tag (ETag): a new one with every write of the
-- plant, so that a client can tell whether it changed, and never one an earlier plant of
-- the same id had: versions come from one sequence, for all plants. The tag used to be a
-- SHA-256 of the plant, computed on every answer; a number read with the row costs nothing.
--
-- The column's default draws one for every insert, also those of code that does not know
-- versions (an older instance during an upgrade, an operator). Adding the column rewrites
-- the table once, giving every plant a version of its own.
CREATE SEQUENCE plant_versions AS bigint;

ALTER TABLE plants ADD COLUMN version bigint NOT NULL DEFAULT nextval('plant_versions');

ALTER SEQUENCE plant_versions OWNED BY plants.version;

-- plantstore writes a new version itself with every change; a change that keeps the
-- version (an older instance, an operator's UPDATE) gets one here. The WHEN is checked
-- without calling the function, so plantstore's own writes do not pay for it.
CREATE FUNCTION plants_new_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.version := nextval('plant_versions');
  RETURN NEW;
END
$$;

CREATE TRIGGER plants_new_version BEFORE UPDATE OF name, tag ON plants
FOR EACH ROW WHEN (NEW.version = OLD.version) EXECUTE FUNCTION plants_new_version();

-- A created plant's answer, kept for its Idempotency-Key, keeps its version: a retry gets the
-- same entity tag. Answers kept before this version take the plant's version if it is
-- unchanged since; the others keep none, and replay an entity tag no plant has.
ALTER TABLE idempotency_keys ADD COLUMN plant_version bigint;

UPDATE idempotency_keys k SET plant_version = p.version
FROM plants p
WHERE k.status = 201 AND p.id = k.plant_id AND p.name = k.plant_name
  AND p.tag IS NOT DISTINCT FROM k.plant_tag;
