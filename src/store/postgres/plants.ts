import type { PlantChange, PlantQuery, StoredPlant } from '../../core/plant.js';
import { plantText } from '../../core/webhooks/events.js';
import { type PlantRow, type StoredPlantRow, toStoredPlant } from '../rows.js';
import {
  type ConditionalWriteOptions,
  PlantChangedError,
  type PlantListing,
  type PlantStore,
} from '../store.js';
import { insert, insertWithKey, origin } from './plant-creates.js';
import type { Query } from './query.js';
import { PlantLines } from './plant-lines.js';
import { STORED, page, TAG_AFTER, updateSql, DELETE, DELETE_IF } from './plant-statements.js';

/** Found the plant locked (`old_id`) but wrote nothing: the expected plant had changed. */
interface WriteRow extends Partial<StoredPlantRow> {
  old_id: bigint;
}

/**
 * Plant writes, each with its audit entry (the changes feed's event, and the webhooks') in
 * the same statement; `written` is called once a write that changed a plant has committed.
 * Changes and deletes of one plant wait in line in the process (see PlantLines).
 */
export function postgresPlants(query: Query, written: () => void): PlantStore {
  const lines = new PlantLines();
  return {
    async insert(plant, options) {
      const created = await insert(query, plant, options);
      written();
      return created;
    },
    async insertWithKey(plant, options) {
      const outcome = await insertWithKey(query, plant, options);
      if (outcome.state === 'created') written();
      return outcome;
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
      const updated = await lines.run(id, () => update(query, id, change, options));
      if (updated !== undefined) written();
      return updated;
    },
    async delete(id, options) {
      const deleted = await lines.run(id, () => remove(query, id, options));
      if (deleted) written();
      return deleted;
    },
  };
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
  const { rows } = await query<PageRow>(name, text, values, { int8AsText: true });
  const more = rows.length > limit;
  if (more) rows.length = limit;
  const json = `[${rows.map((row) => plantText(row.id, row.name, row.tag)).join(',')}]`;
  return more ? { json, next: BigInt(rows.at(-1)!.id) } : { json };
}

/** A plants row with its id as text (`int8AsText`): digits PostgreSQL wrote, exact. */
interface PageRow extends Omit<PlantRow, 'id'> {
  id: string;
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
