-- Plants. AUTOINCREMENT so a server-assigned id is never one a deleted plant had:
-- clients may hold on to ids of plants that are gone.
CREATE TABLE plants (
  id   INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  tag  TEXT
);

CREATE INDEX plants_by_tag ON plants (tag, id) WHERE tag IS NOT NULL;

-- Access tokens, stored only as a SHA-256 hash. Times are Unix milliseconds.
CREATE TABLE tokens (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  name         TEXT    NOT NULL,
  hash         TEXT    NOT NULL UNIQUE,
  scopes       TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER,
  last_used_at INTEGER,
  revoked_at   INTEGER
);
