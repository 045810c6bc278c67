import pg from 'pg';
import type { WriteOrigin } from '../../core/audit.js';
import type { NewPlant, Plant, PlantChange, PlantQuery, StoredPlant } from '../../core/plant.js';
import { type PlantRow, type StoredPlantRow, toPlant, toStoredPlant } from '../rows.js';
import {
  type ConditionalWriteOptions,
  IdsExhaustedError,
  type InsertOptions,
  KeyNotHeldError,
  PlantChangedError,
  PlantExistsError,
  type PlantStore,
} from '../store.js';
import type { Query } from './query.js';
import { MESSAGES_WRITTEN, outboxCtes } from './webhooks.js';

const COLUMNS = 'id, name, tag';
const STORED = `${COLUMNS}, version`;

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
  SELECT c.id, c.name, c.tag, c.version, a.ok AS allowed, ${MESSAGES_WRITTEN}, ${drawn} AS drawn
  FROM allowed a LEFT JOIN created c ON true`;

/** What a create answers: the plant if one was created. */
interface CreateRow extends Partial<StoredPlantRow>, Outboxed {
  allowed: boolean;
  /** The id a server create drew, also when it was taken and nothing was created. */
  drawn: bigint | null;
}

/** How many webhook messages a write added (see outboxCtes). */
interface Outboxed {
  messages: bigint;
}

/** The parameters afterCreate and the other audited writes take, from the write's options. */
const origin = (by: WriteOrigin | undefined) => [
  // ISO text: pg writes a Date out in local time, field by field, at several times the cost.
  new Date().toISOString(),
  by?.tokenId ?? null,
  by?.requestId ?? null,
];

/**
 * `old` locks the plant and reads it as it is now, which is the audit's "before"; the
 * conditional forms compare its version with the one of the plant the caller expects ($n).
 * A new plant's version is the column's default; a change draws the next of its sequence
 * (see the migration 0005_plant_versions).
 */
const LOCK_OLD = `old AS (SELECT ${STORED} FROM plants WHERE id = $1 FOR UPDATE)`;
const unchanged = (n: number) => `AND old.version = $${n}::bigint`;

/** Found the plant locked (`old_id`) but wrote nothing: the expected plant had changed. */
interface WriteRow extends Partial<StoredPlantRow>, Outboxed {
  old_id: bigint;
}

/** The plant a client create made, or why it made none. */
function created(row: CreateRow, refusal: () => Error): StoredPlant {
  if (!row.allowed) throw new KeyNotHeldError();
  if (row.id === null || row.id === undefined) throw refusal();
  return toStoredPlant(row as StoredPlantRow);
}

const page = (where: string) => `SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT $1`;

// A server create claims the id it draws in plant_ids_taken before it creates the plant: an
// id some plant has or had is taken already, and then nothing is created (see the migration),
// nor when a plant inserted by hand, unrecorded, holds the id. `drawn` is MATERIALIZED so
// that nextval runs once.
const INSERT_NEW = `WITH ${KEY_HELD},
  drawn AS MATERIALIZED (
    SELECT nextval('plant_id_seq') AS id WHERE (SELECT ok FROM allowed)),
  claimed AS (
    INSERT INTO plant_ids_taken (id) SELECT id FROM drawn
    ON CONFLICT DO NOTHING RETURNING id),
  created AS (
    INSERT INTO plants (id, name, tag) SELECT id, $1, $2 FROM claimed
    ON CONFLICT (id) DO NOTHING
    RETURNING ${STORED}),
  ${afterCreate('(SELECT id FROM drawn)')}`;

// How many taken ids one skip reads at most, so that a long run of them is skipped in
// statements that each stay short.
const SKIP_WINDOW = 10_000;

// The run of taken ids that starts at the id drawn ($1), up to SKIP_WINDOW of them (the ids
// whose distance from $1 is their rank less one), and the sequence set to its end, unless
// another create has moved it further already. Should it move the sequence back all the
// same (the two are read apart), the ids drawn again are taken, and skipped in turn.
const SKIP_TAKEN = `SELECT setval('plant_id_seq', run.last) FROM (
    SELECT max(id) AS last FROM (
      SELECT id, row_number() OVER (ORDER BY id) AS pos FROM plant_ids_taken
      WHERE id >= $1::bigint ORDER BY id LIMIT ${SKIP_WINDOW}) ids
    WHERE id - $1::bigint + 1 = pos) run, plant_id_seq
  WHERE run.last > plant_id_seq.last_value`;

// A client create records its id as taken before it creates the plant (`recorded` is read to
// the end first), taking its locks in the same order as a server create.
const INSERT_WITH_ID = `WITH ${KEY_HELD},
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

const updateSql = (conditional: boolean) => `WITH ${LOCK_OLD},
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
  SELECT old.id AS old_id, c.id, c.name, c.tag, c.version, ${MESSAGES_WRITTEN}
  FROM old LEFT JOIN changed c ON true`;

const deleteTail = `audited AS (
    ${AUDIT_INSERT}
    SELECT $2::timestamptz, 'delete', id, $3::bigint, $4::text, name, tag, NULL, NULL
    FROM gone),
  ${outboxCtes('plant.deleted', 'gone', '$2::timestamptz')}`;

// No lock of its own: DELETE ... RETURNING locks the row and answers what it was, the
// audit's "before" (one tuple lock, and its WAL record, fewer than locking it first).
const DELETE = `WITH gone AS (
    DELETE FROM plants WHERE id = $1 RETURNING id, name, tag),
  ${deleteTail}
  SELECT g.id AS old_id, g.id, ${MESSAGES_WRITTEN} FROM gone g`;

// Locks the plant first, to tell a plant that changed from one that is not there.
const DELETE_IF = `WITH ${LOCK_OLD},
  gone AS (
    DELETE FROM plants p USING old WHERE p.id = old.id ${unchanged(5)}
    RETURNING p.id, p.name, p.tag),
  ${deleteTail}
  SELECT old.id AS old_id, g.id, ${MESSAGES_WRITTEN} FROM old LEFT JOIN gone g ON true`;

/**
 * Plant writes, each with its webhook messages in the same statement; `wake` is called once
 * a write that added messages has committed.
 */
export function postgresPlants(plainQuery: Query, wake: () => void): PlantStore {
  const query: Query = async <R extends pg.QueryResultRow>(
    name: string,
    text: string,
    values: unknown[],
  ) => {
    const result = await plainQuery<R>(name, text, values);
    const row = result.rows[0] as Partial<Outboxed> | undefined;
    if (row?.messages !== undefined && row.messages > 0n) wake();
    return result;
  };
  return {
    insert: (plant, options) => insert(query, plant, options),
    async get(id: bigint) {
      const { rows } = await query<StoredPlantRow>(
        'plants.get',
        `SELECT ${STORED} FROM plants WHERE id = $1`,
        [id.toString()],
      );
      return rows[0] && toStoredPlant(rows[0]);
    },
    list: (plantQuery) => list(query, plantQuery),
    update: (id, change, options) => update(query, id, change, options),
    delete: (id, options) => remove(query, id, options),
  };
}

async function insert(
  query: Query,
  { id, name, tag }: NewPlant,
  { by, idempotencyKey }: InsertOptions = {},
): Promise<StoredPlant> {
  const values = [
    name,
    tag ?? null,
    ...origin(by),
    idempotencyKey?.tokenId ?? null,
    idempotencyKey?.key ?? null,
  ];
  if (id === undefined) return insertNew(query, values);
  const { rows } = await query<CreateRow>('plants.insertWithId', INSERT_WITH_ID, [
    ...values,
    id.toString(),
  ]);
  return created(rows[0]!, () => new PlantExistsError(id));
}

/**
 * A create with the next id of the sequence that no plant has or had: each try that draws a
 * taken id moves the sequence past the run of taken ids it starts, then tries again.
 */
async function insertNew(query: Query, values: unknown[]): Promise<StoredPlant> {
  for (;;) {
    const row = (await drawAndCreate(query, values))[0]!;
    if (!row.allowed) throw new KeyNotHeldError();
    if (row.id !== null && row.id !== undefined) return toStoredPlant(row as StoredPlantRow);
    await query('plants.skipTaken', SKIP_TAKEN, [row.drawn!.toString()]);
  }
}

/** SQLSTATE of nextval past the sequence's MAXVALUE: every id up to the int64 maximum is used. */
const SEQUENCE_EXHAUSTED = '2200H';

async function drawAndCreate(query: Query, values: unknown[]): Promise<CreateRow[]> {
  try {
    return (await query<CreateRow>('plants.insertNew', INSERT_NEW, values)).rows;
  } catch (error) {
    if (error instanceof pg.DatabaseError && error.code === SEQUENCE_EXHAUSTED) {
      throw new IdsExhaustedError();
    }
    throw error;
  }
}

async function list(query: Query, { limit, after, tag }: PlantQuery): Promise<Plant[]> {
  const [name, text, values] =
    tag === undefined
      ? after === undefined
        ? ['plants.page', page(''), [limit]]
        : ['plants.pageAfter', page('WHERE id > $2'), [limit, after.toString()]]
      : after === undefined
        ? ['plants.pageTag', page('WHERE tag = $2'), [limit, tag]]
        : [
            'plants.pageTagAfter',
            page('WHERE tag = $2 AND id > $3'),
            [limit, tag, after.toString()],
          ];
  const { rows } = await query<PlantRow>(name, text, values);
  return rows.map(toPlant);
}

async function update(
  query: Query,
  id: bigint,
  change: PlantChange,
  { expected, by }: ConditionalWriteOptions = {},
): Promise<StoredPlant | undefined> {
  const values = [
    id.toString(),
    change.name ?? null,
    change.tag !== undefined,
    change.tag ?? null,
    ...origin(by),
  ];
  const { rows } =
    expected === undefined
      ? await query<WriteRow>('plants.update', updateSql(false), values)
      : await query<WriteRow>('plants.updateIf', updateSql(true), [
          ...values,
          expected.version.toString(),
        ]);
  const row = rows[0];
  if (row === undefined) return undefined;
  if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
  return toStoredPlant(row as StoredPlantRow);
}

async function remove(
  query: Query,
  id: bigint,
  { expected, by }: ConditionalWriteOptions = {},
): Promise<boolean> {
  const values = [id.toString(), ...origin(by)];
  const { rows } =
    expected === undefined
      ? await query<WriteRow>('plants.delete', DELETE, values)
      : await query<WriteRow>('plants.deleteIf', DELETE_IF, [
          ...values,
          expected.version.toString(),
        ]);
  const row = rows[0];
  if (row === undefined) return false;
  if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
  return true;
}
