// The SQL of plantstore's plant writes and reads on PostgreSQL (src/store/postgres/plants.ts
// runs them): each write is one statement, its audit entry (the event of the changes feed and
// of the webhooks) and the settling of its Idempotency-Key in CTEs beside the change.
import { KEY_FOUND, takeable } from '../rows.js';

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

// A create with its key in the same statement (PlantStore.insertWithKey) runs only while no
// row has the key, and inserts the key settled with the plant ($8 to $11: the claim's
// fingerprint, time, expiry and lease); `found` is the key's row otherwise, as a claim would
// find it. Two such creates of one key at once: the second's insert waits for the first's
// row at the primary key and, once it commits, fails, so that the whole statement rolls back
// and its request takes the key the long way.
const KEY_NEW = `found AS (
    SELECT ${KEY_FOUND}, ${takeable('$9::timestamptz', '$8::text')} AS takeable
    FROM idempotency_keys k WHERE k.token_id = $6::bigint AND k.key = $7::text),
  allowed AS (SELECT NOT EXISTS (SELECT 1 FROM found) AS ok)`;

const SETTLE_HELD = `settled AS (
    UPDATE idempotency_keys k SET status = 201, plant_id = c.id, plant_name = c.name,
      plant_tag = c.tag, plant_version = c.version
    FROM created c WHERE k.token_id = $6::bigint AND k.key = $7::text AND k.status IS NULL)`;

const KEEP_NEW = `kept AS (
    INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
      lease_until, status, plant_id, plant_name, plant_tag, plant_version)
    SELECT $6::bigint, $7::text, $8::text, $9::timestamptz, $10::timestamptz, $11::timestamptz,
      201, c.id, c.name, c.tag, c.version
    FROM created c)`;

/** How a create treats its key: held by a claim before (or none), or new to the store. */
export type KeyMode = 'held' | 'new';
const keyCheck = (mode: KeyMode) => (mode === 'held' ? KEY_HELD : KEY_NEW);
// The first parameter after the key's: the skip of a retry, or a client create's id.
const nextParam = (mode: KeyMode) => (mode === 'held' ? 8 : 12);

// The create's audit entry and the settling of its key, then the created plant (none if
// nothing was created), whether the key allowed the create, the id a server create drew, and
// (a key in the statement) the key's row found instead.
const afterCreate = (mode: KeyMode, drawn: string) => `audited AS (
    ${AUDIT_INSERT}
    SELECT $3::timestamptz, 'create', id, $4::bigint, $5::text, NULL, NULL, name, tag FROM created),
  ${mode === 'held' ? SETTLE_HELD : KEEP_NEW}
  SELECT c.id, c.name, c.tag, c.version, a.ok AS allowed, ${drawn} AS drawn
    ${mode === 'held' ? '' : ', f.*'}
  FROM allowed a LEFT JOIN created c ON true ${mode === 'held' ? '' : 'LEFT JOIN found f ON true'}`;

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
// answers it as `drawn`, and the next try ($8, or $12 after a new key's) skips its run first
// (`skipped`).
const insertNew = (mode: KeyMode, afterSkip: boolean) => `WITH ${keyCheck(mode)},
  fenced AS MATERIALIZED (
    SELECT pg_advisory_xact_lock_shared(${PLANT_IDS_LOCK}) WHERE (SELECT ok FROM allowed)),${
      afterSkip
        ? `
  skipped AS MATERIALIZED (SELECT plant_ids_skip($${nextParam(mode)}::bigint) FROM fenced),`
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
  ${afterCreate(mode, 'coalesce((SELECT id FROM redrawn), (SELECT id FROM drawn))')}`;

/** The statements of a server create (the first try, and one after a taken id), by key mode. */
export const INSERT_NEW = { held: insertNew('held', false), new: insertNew('new', false) };
export const INSERT_NEW_AFTER_SKIP = { held: insertNew('held', true), new: insertNew('new', true) };

// A client create records its id as taken before it creates the plant (`recorded` is read to
// the end first), taking its locks in the same order as a server create. Its id is $8, or $12
// with a new key.
const insertWithId = (mode: KeyMode) => `WITH ${keyCheck(mode)},
  recorded AS (
    INSERT INTO plant_ids_taken (id) SELECT $${nextParam(mode)}::bigint
    WHERE (SELECT ok FROM allowed)
    ON CONFLICT DO NOTHING RETURNING id),
  created AS (
    INSERT INTO plants (id, name, tag)
    SELECT $${nextParam(mode)}::bigint, $1, $2 FROM (SELECT count(*) FROM recorded) r
    WHERE (SELECT ok FROM allowed)
    ON CONFLICT (id) DO NOTHING
    RETURNING ${STORED}),
  ${afterCreate(mode, 'NULL::bigint')}`;

export const INSERT_WITH_ID = { held: insertWithId('held'), new: insertWithId('new') };

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
    FROM changed)
  SELECT old.id AS old_id, c.id, c.name, c.tag, c.version
  FROM old LEFT JOIN changed c ON true`;

const deleteTail = `audited AS (
    ${AUDIT_INSERT}
    SELECT $2::timestamptz, 'delete', id, $3::bigint, $4::text, name, tag, NULL, NULL
    FROM gone)`;

// No lock of its own: DELETE ... RETURNING locks the row and answers what it was, the
// audit's "before" (one tuple lock, and its WAL record, fewer than locking it first).
export const DELETE = `WITH gone AS (
    DELETE FROM plants WHERE id = $1 RETURNING id, name, tag),
  ${deleteTail}
  SELECT g.id AS old_id, g.id FROM gone g`;

// Locks the plant first, to tell a plant that changed from one that is not there.
export const DELETE_IF = `WITH ${LOCK_OLD},
  gone AS (
    DELETE FROM plants p USING old WHERE p.id = old.id ${unchanged(5)}
    RETURNING p.id, p.name, p.tag),
  ${deleteTail}
  SELECT old.id AS old_id, g.id FROM old LEFT JOIN gone g ON true`;
