import type pg from 'pg';
import type { WriteOrigin } from '../../core/audit.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../../core/plant.js';
import { type PlantRow, toPlant } from '../rows.js';
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
// nothing was created) and whether the key was held.
const AFTER_CREATE = `audited AS (
    ${AUDIT_INSERT}
    SELECT $3::timestamptz, 'create', id, $4::bigint, $5::text, NULL, NULL, name, tag FROM created),
  settled AS (
    UPDATE idempotency_keys k SET status = 201, plant_id = c.id, plant_name = c.name,
      plant_tag = c.tag
    FROM created c WHERE k.token_id = $6::bigint AND k.key = $7::text AND k.status IS NULL),
  ${outboxCtes('plant.created', 'created', '$3::timestamptz')}
  SELECT c.id, c.name, c.tag, a.ok AS allowed, ${MESSAGES_WRITTEN}
  FROM allowed a LEFT JOIN created c ON true`;

/** What a create answers: the plant if one was created. */
interface CreateRow extends Partial<PlantRow>, Outboxed {
  allowed: boolean;
}

/** How many webhook messages a write added (see outboxCtes). */
interface Outboxed {
  messages: bigint;
}

/** The parameters AFTER_CREATE and the other audited writes take, from the write's options. */
const origin = (by: WriteOrigin | undefined) => [
  new Date(),
  by?.tokenId ?? null,
  by?.requestId ?? null,
];

/**
 * `old` locks the plant and reads it as it is now, which is the audit's "before"; the
 * conditional forms compare it with the plant the caller expects ($n, $n+1).
 */
const LOCK_OLD = `old AS (SELECT ${COLUMNS} FROM plants WHERE id = $1 FOR UPDATE)`;
const unchanged = (n: number) => `AND old.name = $${n} AND old.tag IS NOT DISTINCT FROM $${n + 1}`;

/** Found the plant locked (`old_id`) but wrote nothing: the expected plant had changed. */
interface WriteRow extends Partial<PlantRow>, Outboxed {
  old_id: bigint;
}

/** The plant a create made, or why it made none. */
function created(row: CreateRow, refusal: () => Error): Plant {
  if (!row.allowed) throw new KeyNotHeldError();
  if (row.id === null || row.id === undefined) throw refusal();
  return toPlant(row as PlantRow);
}

const page = (where: string) => `SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT $1`;

const INSERT_NEW = `WITH ${KEY_HELD},
  next AS (
    UPDATE plant_ids SET high = high + 1
    WHERE high < 9223372036854775807 AND (SELECT ok FROM allowed) RETURNING high),
  created AS (
    INSERT INTO plants (id, name, tag) SELECT high, $1, $2 FROM next
    RETURNING ${COLUMNS}),
  ${AFTER_CREATE}`;

// The INSERT reads from `bump`, so the plant_ids row is locked before the plants row: the
// same order as INSERT_NEW (see the migration).
const INSERT_WITH_ID = `WITH ${KEY_HELD},
  bump AS (
    UPDATE plant_ids SET high = greatest(high, $8::bigint)
    WHERE (SELECT ok FROM allowed) RETURNING high),
  created AS (
    INSERT INTO plants (id, name, tag) SELECT $8::bigint, $1, $2 FROM bump
    ON CONFLICT (id) DO NOTHING
    RETURNING ${COLUMNS}),
  ${AFTER_CREATE}`;

const updateSql = (conditional: boolean) => `WITH ${LOCK_OLD},
  changed AS (
    UPDATE plants p SET name = coalesce($2::text, p.name),
      tag = CASE WHEN $3::boolean THEN $4::text ELSE p.tag END
    FROM old WHERE p.id = old.id ${conditional ? unchanged(8) : ''}
    RETURNING p.id, p.name, p.tag, old.name AS old_name, old.tag AS old_tag),
  audited AS (
    ${AUDIT_INSERT}
    SELECT $5::timestamptz, 'update', id, $6::bigint, $7::text, old_name, old_tag, name, tag
    FROM changed),
  ${outboxCtes('plant.updated', 'changed', '$5::timestamptz')}
  SELECT old.id AS old_id, c.id, c.name, c.tag, ${MESSAGES_WRITTEN}
  FROM old LEFT JOIN changed c ON true`;

const deleteSql = (conditional: boolean) => `WITH ${LOCK_OLD},
  gone AS (
    DELETE FROM plants p USING old WHERE p.id = old.id ${conditional ? unchanged(5) : ''}
    RETURNING p.id, p.name, p.tag),
  audited AS (
    ${AUDIT_INSERT}
    SELECT $2::timestamptz, 'delete', id, $3::bigint, $4::text, name, tag, NULL, NULL
    FROM gone),
  ${outboxCtes('plant.deleted', 'gone', '$2::timestamptz')}
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
      const { rows } = await query<PlantRow>(
        'plants.get',
        `SELECT ${COLUMNS} FROM plants WHERE id = $1`,
        [id.toString()],
      );
      return rows[0] && toPlant(rows[0]);
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
): Promise<Plant> {
  const after = [...origin(by), idempotencyKey?.tokenId ?? null, idempotencyKey?.key ?? null];
  if (id === undefined) {
    const { rows } = await query<CreateRow>('plants.insertNew', INSERT_NEW, [
      name,
      tag ?? null,
      ...after,
    ]);
    return created(rows[0]!, () => new IdsExhaustedError());
  }
  const { rows } = await query<CreateRow>('plants.insertWithId', INSERT_WITH_ID, [
    name,
    tag ?? null,
    ...after,
    id.toString(),
  ]);
  return created(rows[0]!, () => new PlantExistsError(id));
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
): Promise<Plant | undefined> {
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
          expected.name,
          expected.tag ?? null,
        ]);
  const row = rows[0];
  if (row === undefined) return undefined;
  if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
  return toPlant(row as PlantRow);
}

async function remove(
  query: Query,
  id: bigint,
  { expected, by }: ConditionalWriteOptions = {},
): Promise<boolean> {
  const values = [id.toString(), ...origin(by)];
  const { rows } =
    expected === undefined
      ? await query<WriteRow>('plants.delete', deleteSql(false), values)
      : await query<WriteRow>('plants.deleteIf', deleteSql(true), [
          ...values,
          expected.name,
          expected.tag ?? null,
        ]);
  const row = rows[0];
  if (row === undefined) return false;
  if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
  return true;
}
