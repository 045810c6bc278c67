-- Plants. Server-assigned ids come from plant_ids.high, the largest id ever stored
-- (as SQLite's AUTOINCREMENT does): an id a deleted plant had is never handed out again.
CREATE TABLE plants (
  id   bigint PRIMARY KEY,
  name text NOT NULL,
  tag  text
);

CREATE INDEX plants_by_tag ON plants (tag, id) WHERE tag IS NOT NULL;

-- One row. Every insert locks it first, so the inserts that assign ids and the ones
-- that give their own take locks in the same order and cannot deadlock.
CREATE TABLE plant_ids (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  high     bigint  NOT NULL
);
INSERT INTO plant_ids (high) VALUES (0);

-- Access tokens, stored only as a SHA-256 hash.
CREATE TABLE tokens (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name         text        NOT NULL,
  hash         text        NOT NULL UNIQUE,
  scopes       text        NOT NULL,
  created_at   timestamptz NOT NULL,
  expires_at   timestamptz,
  last_used_at timestamptz,
  revoked_at   timestamptz
);
