// The SQL of plantstore's plant writes and reads on SQLite (src/store/sqlite/plants.ts runs
// them in its transactions), as postgres/plant-statements.ts holds PostgreSQL's.
import type Database from 'better-sqlite3';
import { KEY_FOUND, STORED_PLANT_COLUMNS, takeable } from '../rows.js';

const COLUMNS = 'id, name, tag';
// Writes read the version too. A new plant gets its version from the column's default
// (random()), a changed one a new random() (see the migration 0005_plant_versions).
const STORED = STORED_PLANT_COLUMNS;

type Statement = Database.Statement;
// Named, not inferred: the build's declarations cannot name better-sqlite3's own types.
export interface Reads {
  getOne: Statement;
  pages: Record<'all' | 'after' | 'tag' | 'tagAfter', Statement>;
}
export type Writes = Record<
  | 'insertWithId'
  | 'insertIfFree'
  | 'update'
  | 'remove'
  | 'audit'
  | 'settleCreated'
  | 'keyHeld'
  | 'keyFound'
  | 'keepCreated',
  Statement
>;

/**
 * A page of plants as one row: `json` the page as the list's JSON text (see PlantListing),
 * `last` its last id, `more` whether a plant follows it (one probe of the index). The array
 * takes the plants in the order the subquery yields them, its ORDER BY, which SQLite's
 * documentation does not promise (it calls an aggregate's order arbitrary without an ORDER BY
 * inside it) but its planner keeps: a subquery with a LIMIT runs as a co-routine that is
 * neither merged nor reordered. An ORDER BY inside json_group_array would add a sort (the
 * statement took 1.5 times as long in a loop); the store tests hold the order on every page.
 * SQLite 3.53 (better-sqlite3's) escapes strings as JSON.stringify does; test/helpers/listed.ts
 * compares every page the tests list, so another SQLite that differs fails them.
 */
const pageOf = (where: string) => `SELECT json, last,
    EXISTS (SELECT 1 FROM plants ${where === '' ? 'WHERE' : `${where} AND`} id > last) AS more
  FROM (SELECT json_group_array(CASE WHEN tag IS NULL THEN json_object('id', id, 'name', name)
        ELSE json_object('id', id, 'name', name, 'tag', tag) END) AS json, max(id) AS last
    FROM (SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT @limit))`;

/** The row of a page statement (see `pageOf`). */
export interface PageRow {
  json: string;
  last: bigint | null;
  more: bigint;
}

/** The statements that read plants. */
export function prepareReads(db: Database.Database): Reads {
  const page = (where: string) => db.prepare(pageOf(where));
  return {
    getOne: db.prepare(`SELECT ${STORED} FROM plants WHERE id = ?`),
    pages: {
      all: page(''),
      after: page('WHERE id > @after'),
      tag: page('WHERE tag = @tag'),
      tagAfter: page('WHERE tag = @tag AND id > @after'),
    },
  };
}

/** The statements that write plants, and the audit entries and keys that go with them. */
export function prepareWrites(db: Database.Database): Writes {
  return {
    insertWithId: db.prepare(
      `INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) RETURNING ${STORED}`,
    ),
    insertIfFree: db.prepare(
      `INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING
       RETURNING ${STORED}`,
    ),
    update: db.prepare(
      `UPDATE plants SET name = coalesce(@name, name),
         tag = CASE WHEN @setTag THEN @tag ELSE tag END, version = random()
       WHERE id = @id RETURNING ${STORED}`,
    ),
    remove: db.prepare('DELETE FROM plants WHERE id = ?'),
    audit: db.prepare(
      `INSERT INTO audit_log (at, action, plant_id, token_id, request_id,
         before_name, before_tag, after_name, after_tag)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    settleCreated: db.prepare(
      `UPDATE idempotency_keys SET status = 201, plant_id = ?, plant_name = ?, plant_tag = ?,
         plant_version = ?
       WHERE token_id = ? AND key = ? AND status IS NULL`,
    ),
    keyHeld: db.prepare(
      'SELECT 1 FROM idempotency_keys WHERE token_id = ? AND key = ? AND status IS NULL',
    ),
    // The key's row as a claim at @at would find it (PlantStore.insertWithKey).
    keyFound: db.prepare(
      `SELECT ${KEY_FOUND}, ${takeable('@at', '@fingerprint')} AS takeable
       FROM idempotency_keys k WHERE k.token_id = @tokenId AND k.key = @key`,
    ),
    // The key of a create that took it new, settled at once (PlantStore.insertWithKey).
    keepCreated: db.prepare(
      `INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
         lease_until, status, plant_id, plant_name, plant_tag, plant_version)
       VALUES (@tokenId, @key, @fingerprint, @at, @expiresAt, @leaseUntil, 201, @id, @name,
         @tag, @version)`,
    ),
  };
}
