import type Database from 'better-sqlite3';
import type { AuditAction, WriteOrigin } from '../../core/audit.js';
import { INT64_MAX } from '../../core/int64.js';
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
  samePlant,
} from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard, isSqliteError } from './query.js';

export function sqlitePlants(db: Database.Database, batches: GroupCommit): PlantStore {
  const write = batchedWrites(batches);
  const columns = 'id, name, tag';
  const insertWithId = db.prepare(
    `INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) RETURNING ${columns}`,
  );
  const insertNew = db.prepare(`INSERT INTO plants (name, tag) VALUES (?, ?) RETURNING ${columns}`);
  const largestAssigned = db
    .prepare("SELECT seq FROM sqlite_sequence WHERE name = 'plants'")
    .pluck();
  const getOne = db.prepare(`SELECT ${columns} FROM plants WHERE id = ?`);
  const update = db.prepare(
    `UPDATE plants SET name = coalesce(@name, name),
       tag = CASE WHEN @setTag THEN @tag ELSE tag END
     WHERE id = @id RETURNING ${columns}`,
  );
  const remove = db.prepare('DELETE FROM plants WHERE id = ?');
  const audit = db.prepare(
    `INSERT INTO audit_log (at, action, plant_id, token_id, request_id,
       before_name, before_tag, after_name, after_tag)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const settleCreated = db.prepare(
    `UPDATE idempotency_keys SET status = 201, plant_id = ?, plant_name = ?, plant_tag = ?
     WHERE token_id = ? AND key = ? AND status IS NULL`,
  );
  const keyHeld = db.prepare(
    'SELECT 1 FROM idempotency_keys WHERE token_id = ? AND key = ? AND status IS NULL',
  );
  const page = (where: string) =>
    db.prepare(`SELECT ${columns} FROM plants ${where} ORDER BY id LIMIT @limit`);
  const pages = {
    all: page(''),
    after: page('WHERE id > @after'),
    tag: page('WHERE tag = @tag'),
    tagAfter: page('WHERE tag = @tag AND id > @after'),
  };

  const record = (
    action: AuditAction,
    id: bigint,
    before: Plant | undefined,
    after: Plant | undefined,
    by: WriteOrigin | undefined,
  ) =>
    audit.run(
      Date.now(),
      action,
      id,
      by?.tokenId ?? null,
      by?.requestId ?? null,
      before?.name ?? null,
      before?.tag ?? null,
      after?.name ?? null,
      after?.tag ?? null,
    );

  /** The plant a conditional write acts on, read inside the write's own savepoint. */
  const current = (id: bigint, expected: Plant | undefined): Plant | undefined => {
    const row = getOne.get(id) as PlantRow | undefined;
    const plant = row && toPlant(row);
    if (plant !== undefined && expected !== undefined && !samePlant(plant, expected)) {
      throw new PlantChangedError(id);
    }
    return plant;
  };

  return {
    insert: ({ id, name, tag }: NewPlant, { by, idempotencyKey }: InsertOptions = {}) =>
      write(() => {
        if (
          idempotencyKey &&
          keyHeld.get(idempotencyKey.tokenId, idempotencyKey.key) === undefined
        ) {
          throw new KeyNotHeldError();
        }
        let plant: Plant;
        if (id === undefined) {
          // Checked first: SQLite answers exhaustion with SQLITE_FULL, which may roll back
          // the whole transaction, and with it the other writes of the batch.
          if (largestAssigned.get() === INT64_MAX) throw new IdsExhaustedError();
          plant = toPlant(insertNew.get(name, tag ?? null) as PlantRow);
        } else {
          try {
            plant = toPlant(insertWithId.get(id, name, tag ?? null) as PlantRow);
          } catch (error) {
            if (isSqliteError(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) {
              throw new PlantExistsError(id);
            }
            throw error;
          }
        }
        record('create', plant.id, undefined, plant, by);
        if (idempotencyKey !== undefined) {
          const { tokenId, key } = idempotencyKey;
          settleCreated.run(plant.id, plant.name, plant.tag ?? null, tokenId, key);
        }
        return plant;
      }),
    async get(id: bigint) {
      const row = guard(() => getOne.get(id)) as PlantRow | undefined;
      return row && toPlant(row);
    },
    async list({ limit, after, tag }: PlantQuery) {
      const statement =
        tag === undefined
          ? after === undefined
            ? pages.all
            : pages.after
          : after === undefined
            ? pages.tag
            : pages.tagAfter;
      const rows = guard(() => statement.all({ limit, after, tag })) as PlantRow[];
      return rows.map(toPlant);
    },
    update: (id: bigint, change: PlantChange, { expected, by }: ConditionalWriteOptions = {}) =>
      write(() => {
        const before = current(id, expected);
        if (before === undefined) return undefined;
        const after = toPlant(
          update.get({
            id,
            name: change.name ?? null,
            setTag: change.tag === undefined ? 0 : 1,
            tag: change.tag ?? null,
          }) as PlantRow,
        );
        record('update', id, before, after, by);
        return after;
      }),
    delete: (id: bigint, { expected, by }: ConditionalWriteOptions = {}) =>
      write(() => {
        const before = current(id, expected);
        if (before === undefined) return false;
        remove.run(id);
        record('delete', id, before, undefined, by);
        return true;
      }),
  };
}
