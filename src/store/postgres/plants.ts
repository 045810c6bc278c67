import pg from 'pg';
import type { WriteOrigin } from '../../core/audit.js';
import type { NewPlant, PlantChange, PlantQuery, StoredPlant } from '../../core/plant.js';
import { plantPayload } from '../../core/webhooks/events.js';
import { type PlantRow, type StoredPlantRow, toPlant, toStoredPlant } from '../rows.js';
import {
  type ConditionalWriteOptions,
  IdsExhaustedError,
  type InsertOptions,
  KeyNotHeldError,
  PlantChangedError,
  PlantExistsError,
  type PlantListing,
  type PlantStore,
} from '../store.js';
import type { Query, QueryOptions } from './query.js';
import {
  STORED,
  page,
  TAG_AFTER,
  INSERT_NEW,
  INSERT_NEW_AFTER_SKIP,
  INSERT_WITH_ID,
  updateSql,
  DELETE,
  DELETE_IF,
} from './plant-statements.js';

/** What a create answers: the plant if one was created. */
interface CreateRow extends Partial<StoredPlantRow>, Outboxed {
  allowed: boolean;
  /** The id a server create drew, also when it was taken and nothing was created. */
  drawn: bigint | null;
}

/** Whether a write recorded a webhook event (see outboxCtes). */
interface Outboxed {
  events: bigint;
}

/** The parameters afterCreate and the other audited writes take, from the write's options. */
const origin = (by: WriteOrigin | undefined) => [
  // ISO text: pg writes a Date out in local time, field by field, at several times the cost.
  new Date().toISOString(),
  by?.tokenId ?? null,
  by?.requestId ?? null,
];

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

/**
 * Plant writes, each with its audit entry (the changes feed's event) and its webhook event in
 * the same statement; `wake` is called once a write that recorded a webhook event has
 * committed, `written` once any write that changed a plant has.
 */
export function postgresPlants(
  plainQuery: Query,
  wake: () => void,
  written: () => void,
): PlantStore {
  const query: Query = async <R extends pg.QueryResultRow>(
    name: string,
    text: string,
    values: unknown[],
    options?: QueryOptions,
  ) => {
    const result = await plainQuery<R>(name, text, values, options);
    const row = result.rows[0] as Partial<Outboxed> | undefined;
    if (row?.events !== undefined && row.events > 0n) wake();
    return result;
  };
  return {
    async insert(plant, options) {
      const created = await insert(query, plant, options);
      written();
      return created;
    },
    async get(id: bigint) {
      const { rows } = await query<StoredPlantRow>(
        'plants.get',
        `SELECT ${STORED} FROM plants WHERE id = $1`,
        [id.toString()],
      );
      return rows[0] && toStoredPlant(rows[0]);
    },
    list: (plantQuery) => list(query, plantQuery),
    async update(id, change, options) {
      const updated = await update(query, id, change, options);
      if (updated !== undefined) written();
      return updated;
    },
    async delete(id, options) {
      const deleted = await remove(query, id, options);
      if (deleted) written();
      return deleted;
    },
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
  let skip: bigint | undefined;
  for (;;) {
    const row = (await drawAndCreate(query, values, skip))[0]!;
    if (!row.allowed) throw new KeyNotHeldError();
    if (row.id !== null && row.id !== undefined) return toStoredPlant(row as StoredPlantRow);
    skip = row.drawn!;
  }
}

/** SQLSTATE of nextval past the sequence's MAXVALUE: every id up to the int64 maximum is used. */
const SEQUENCE_EXHAUSTED = '2200H';

/** One try; `skip`, the taken id the try before drew, is skipped first. */
async function drawAndCreate(
  query: Query,
  values: unknown[],
  skip: bigint | undefined,
): Promise<CreateRow[]> {
  try {
    const { rows } =
      skip === undefined
        ? await query<CreateRow>('plants.insertNew', INSERT_NEW, values)
        : await query<CreateRow>('plants.insertNewAfterSkip', INSERT_NEW_AFTER_SKIP, [
            ...values,
            skip.toString(),
          ]);
    return rows;
  } catch (error) {
    if (error instanceof pg.DatabaseError && error.code === SEQUENCE_EXHAUSTED) {
      throw new IdsExhaustedError();
    }
    throw error;
  }
}

async function list(query: Query, { limit, after, tag }: PlantQuery): Promise<PlantListing> {
  const [name, text, values] =
    tag === undefined
      ? after === undefined
        ? ['plants.page', page(''), [limit + 1]]
        : ['plants.pageAfter', page('WHERE id > $2'), [limit + 1, after.toString()]]
      : after === undefined
        ? ['plants.pageTag', page('WHERE tag = $2'), [limit + 1, tag]]
        : ['plants.pageTagAfter', page(TAG_AFTER), [limit + 1, tag, after.toString()]];
  const { rows } = await query<PlantRow>(name, text, values);
  const plants = rows.slice(0, limit).map(toPlant);
  const json = `[${plants.map(plantPayload).join(',')}]`;
  return rows.length > limit ? { json, next: plants.at(-1)!.id } : { json };
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
