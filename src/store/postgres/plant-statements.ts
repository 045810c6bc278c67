// The SQL of plantstore's plant writes and reads on PostgreSQL (src/store/postgres/plants.ts
// runs them): each write is one statement, its audit entry, the settling of its
// Idempotency-Key and its webhook event in CTEs beside the change.
import { EVENTS_RECORDED, outboxCtes } from './webhooks.js';

const COLUMNS = 'id, name, tag';
export const STORED = `${COLUMNS}, version`;

// Every write below is one statement: the change, its audit entry (and the settling of an
// Idempotency-Key) commit together or not at all, in one round trip.
const AUDIT_INSERT = `INSERT INTO audit_log (at, action, plant_id, token_id, request_id,
  before_name, before_tag, after_name, after_tag)`;

// A create with an Idempotency-Key ($6, $7: null for none) runs only while its request still
// holds the key: `held` locks the key's row, so a release or takeover waits for this
// statement, and `allowed` says whether to create at all.
const KEY_HELD = `held AS (
    SELECT 1 FROM idempotency_keys
    WHERE token_id = $6::bigint AND key = $7::text AND status IS NULL FOR UPDATE),
  allowed AS (SELECT $7::text IS NULL OR EXISTS (SELECT 1 FROM held) AS ok)`;

// The create's audit entry and the settling of its key, then the created plant (none if
// nothing was created), whether the key was held, and the id a server create drew.
const afterCreate = (drawn: string) => `audited AS (
    ${AUDIT_INSERT}
    SELECT $3::timestamptz, 'create', id, $4::bigint, $5::text, NULL, NULL, name, tag FROM created),
  settled AS (
    UPDATE idempotency_keys k SET status = 201, plant_id = c.id, plant_name = c.name,
      plant_tag = c.tag, plant_version = c.version
    FROM created c WHERE k.token_id = $6::bigint AND k.key = $7::text AND k.status IS NULL),
  ${outboxCtes('plant.created', 'created', '$3::timestamptz')}
  SELECT c.id, c.name, c.tag, c.version, a.ok AS allowed, ${EVENTS_RECORDED}, ${drawn} AS drawn
  FROM allowed a LEFT JOIN created c ON true`;

/**
 * `old` locks the plant and reads it as it is now, which is the audit's "before"; the
 * conditional forms compare its version with the one of the plant the caller expects ($n).
 * A new plant's version is the column's default; a change draws the next of its sequence
 * (see the migration 0005_plant_versions).
 */
const LOCK_OLD = `old AS (SELECT ${STORED} FROM plants WHERE id = $1 FOR UPDATE)`;
const unchanged = (n: number) => `AND old.version = $${n}::bigint`;

/**
 * A page of plants, and one row more, which tells whether another page follows. Rows, not the
 * page's JSON text built in the query as on SQLite: PostgreSQL spent 440 µs of its CPU on a
 * 100-plant page written with to_json and string_agg, against 130 µs for the rows (measured,
 * bench/HISTORY.md), and the database is the part of a deployment that does not scale out.
 */
export const page = (where: string) =>
  `SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT $1`;

// The cursor of a page of one tag as a bound on (tag, id): a condition plants_by_tag answers
// and the primary key does not, so that even a generic plan reads this tag's plants, never
// every plant after the cursor, filtering the tag.
export const TAG_AFTER = 'WHERE tag = $2 AND (tag, id) > ($2, $3::bigint)';

// The advisory lock that a prune of plant_ids_taken takes alone and server creates and skips
// share, 'plantids' in ASCII (see the migration 0007_plant_id_pruning).
const PLANT_IDS_LOCK = '8100956956760040563';

// A server create claims the id it draws in plant_ids_taken before it creates the plant: an
// id some plant has or had is taken already, and then nothing is created (see the migration),
// nor when a plant inserted by hand, unrecorded, holds the id. `fenced` takes the shared lock
// before the draw (`drawn` reads its row), so that no prune runs between draw and claim; the
// draws are MATERIALIZED so that each runs once.
//
// A claim that fails (the drawn id is taken) is tried once more in the same statement:
// `reskipped` moves the sequence past the run of taken ids the drawn id starts
// (plant_ids_skip, in the migration 0007_plant_id_pruning) and `redrawn` draws again. Both
// read `claimed`, so they run after it and only when it claimed nothing: a fresh create pays
// nothing for them, and one after clients took ids above the counter pays one statement and
// one commit, not two. Should the second id be taken too (a claim in between), the statement
// answers it as `drawn`, and the next try ($8) skips its run first (`skipped`).
const insertNew = (afterSkip: boolean) => `WITH ${KEY_HELD},
  fenced AS MATERIALIZED (
    SELECT pg_advisory_xact_lock_shared(${PLANT_IDS_LOCK}) WHERE (SELECT ok FROM allowed)),${
      afterSkip
        ? `
  skipped AS MATERIALIZED (SELECT plant_ids_skip($8::bigint) FROM fenced),`
        : ''
    }
  drawn AS MATERIALIZED (
    SELECT nextval('plant_id_seq') AS id FROM fenced${afterSkip ? ', skipped' : ''}),
  claimed AS (
    INSERT INTO plant_ids_taken (id) SELECT id FROM drawn
    ON CONFLICT DO NOTHING RETURNING id),
  reskipped AS MATERIALIZED (
    SELECT plant_ids_skip(id) FROM drawn WHERE NOT EXISTS (SELECT 1 FROM claimed)),
  redrawn AS MATERIALIZED (SELECT nextval('plant_id_seq') AS id FROM reskipped),
  reclaimed AS (
    INSERT INTO plant_ids_taken (id) SELECT id FROM redrawn
    ON CONFLICT DO NOTHING RETURNING id),
  created AS (
    INSERT INTO plants (id, name, tag)
    SELECT id, $1, $2 FROM (SELECT id FROM claimed UNION ALL SELECT id FROM reclaimed) c
    ON CONFLICT (id) DO NOTHING
    RETURNING ${STORED}),
  ${afterCreate('coalesce((SELECT id FROM redrawn), (SELECT id FROM drawn))')}`;

export const INSERT_NEW = insertNew(false);
export const INSERT_NEW_AFTER_SKIP = insertNew(true);

// A client create records its id as taken before it creates the plant (`recorded` is read to
// the end first), taking its locks in the same order as a server create.
export const INSERT_WITH_ID = `WITH ${KEY_HELD},
  recorded AS (
    INSERT INTO plant_ids_taken (id) SELECT $8::bigint WHERE (SELECT ok FROM allowed)
    ON CONFLICT DO NOTHING RETURNING id),
  created AS (
    INSERT INTO plants (id, name, tag)
    SELECT $8::bigint, $1, $2 FROM (SELECT count(*) FROM recorded) r
    WHERE (SELECT ok FROM allowed)
    ON CONFLICT (id) DO NOTHING
    RETURNING ${STORED}),
  ${afterCreate('NULL::bigint')}`;

export const updateSql = (conditional: boolean) => `WITH ${LOCK_OLD},
  changed AS (
    UPDATE plants p SET name = coalesce($2::text, p.name),
      tag = CASE WHEN $3::boolean THEN $4::text ELSE p.tag END,
      version = nextval('plant_versions')
    FROM old WHERE p.id = old.id ${conditional ? unchanged(8) : ''}
    RETURNING p.id, p.name, p.tag, p.version, old.name AS old_name, old.tag AS old_tag),
  audited AS (
    ${AUDIT_INSERT}
    SELECT $5::timestamptz, 'update', id, $6::bigint, $7::text, old_name, old_tag, name, tag
    FROM changed),
  ${outboxCtes('plant.updated', 'changed', '$5::timestamptz')}
  SELECT old.id AS old_id, c.id, c.name, c.tag, c.version, ${EVENTS_RECORDED}
  FROM old LEFT JOIN changed c ON true`;

const deleteTail = `audited AS (
    ${AUDIT_INSERT}
    SELECT $2::timestamptz, 'delete', id, $3::bigint, $4::text, name, tag, NULL, NULL
    FROM gone),
  ${outboxCtes('plant.deleted', 'gone', '$2::timestamptz')}`;

// No lock of its own: DELETE ... RETURNING locks the row and answers what it was, the
// audit's "before" (one tuple lock, and its WAL record, fewer than locking it first).
export const DELETE = `WITH gone AS (
    DELETE FROM plants WHERE id = $1 RETURNING id, name, tag),
  ${deleteTail}
  SELECT g.id AS old_id, g.id, ${EVENTS_RECORDED} FROM gone g`;

// Locks the plant first, to tell a plant that changed from one that is not there.
export const DELETE_IF = `WITH ${LOCK_OLD},
  gone AS (
    DELETE FROM plants p USING old WHERE p.id = old.id ${unchanged(5)}
    RETURNING p.id, p.name, p.tag),
  ${deleteTail}
  SELECT old.id AS old_id, g.id, ${EVENTS_RECORDED} FROM old LEFT JOIN gone g ON true`;
