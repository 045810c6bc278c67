import type Database from 'better-sqlite3';
import type { AuditAction, WriteOrigin } from '../../core/audit.js';
import { keyDeadlines } from '../../core/idempotency.js';
import type { NewPlant, Plant, PlantChange, PlantQuery, StoredPlant } from '../../core/plant.js';
import type { EventRow } from '../event-rows.js';
import { claimRefusal, type KeyRow, type StoredPlantRow, toStoredPlant } from '../rows.js';
import {
  type ConditionalWriteOptions,
  IdsExhaustedError,
  type InsertOptions,
  KeyNotHeldError,
  LONG_WAY,
  type KeyedInsert,
  type KeyedInsertOptions,
  PlantChangedError,
  PlantExistsError,
  type PlantListing,
  type PlantStore,
} from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { type PlantIds, sqlitePlantIds } from './plant-ids.js';
import {
  type PageRow,
  prepareReads,
  prepareWrites,
  type Reads,
  type Writes,
} from './plant-statements.js';
import { batchedWrites, guard, isSqliteError } from './query.js';

/** Who hears of a write's commit. */
export interface PlantEvents {
  /**
   * Called once a write that changed a plant has committed, with the audit entries it wrote
   * (the changes feed's events, in seq order; also the webhooks', see WebhookEvents).
   */
  appended: (entries: readonly EventRow[]) => void;
}

/** Plant writes, each with its audit entry (the changes feed's event) in its own savepoint. */
export function sqlitePlants(
  db: Database.Database,
  batches: GroupCommit,
  { appended }: PlantEvents,
): PlantStore {
  const batched = batchedWrites(batches);
  // Keeps a write's audit entries, handed over only after its batch committed.
  const write = async <T>(work: (entries: EventRow[]) => T): Promise<T> => {
    const entries: EventRow[] = [];
    const value = await batched(() => work(entries));
    if (entries.length > 0) appended(entries);
    return value;
  };
  const reads = prepareReads(db);
  const writes = prepareWrites(db);
  const ids = sqlitePlantIds(db);
  return {
    insert: (plant: NewPlant, options: InsertOptions = {}) =>
      write((entries) => {
        const created = insert(writes, ids, plant, options, entries);
        return created;
      }),
    insertWithKey: (plant: NewPlant, { by, claim }: KeyedInsertOptions) =>
      write((entries): KeyedInsert => {
        // The transaction holds the database's write lock: no other process adds the key
        // between this look and the insert below.
        const { tokenId, key, fingerprint } = claim;
        const at = claim.at.getTime();
        const found = writes.keyFound.get({ tokenId, key, fingerprint, at }) as KeyRow | undefined;
        if (found !== undefined)
          return found.takeable ? LONG_WAY : claimRefusal(found, fingerprint);
        const created = insert(writes, ids, plant, { by }, entries);
        writes.keepCreated.run({
          tokenId,
          key,
          fingerprint,
          at,
          ...keyDeadlines(claim.at),
          id: created.id,
          name: created.name,
          tag: created.tag ?? null,
          version: created.version,
        });
        return { state: 'created', plant: created };
      }).catch(refusedTheLongWay),
    get(id: bigint) {
      const row = guard(() => reads.getOne.get(id)) as StoredPlantRow | undefined;
      return row && toStoredPlant(row);
    },
    list: async (query: PlantQuery) => list(reads, query),
    update: (id: bigint, change: PlantChange, { expected, by }: ConditionalWriteOptions = {}) =>
      write((entries) => {
        const before = currentPlant(reads, id, expected);
        if (before === undefined) return undefined;
        const after = applyChange(writes, id, change);
        entries.push(record(writes, 'update', id, before, after, by));
        return after;
      }),
    delete: (id: bigint, { expected, by }: ConditionalWriteOptions = {}) =>
      write((entries) => {
        const before = currentPlant(reads, id, expected);
        if (before === undefined) return false;
        writes.remove.run(id);
        entries.push(record(writes, 'delete', id, before, undefined, by));
        return true;
      }),
  };
}

/** A create refused inside insertWithKey: rolled back, its key left to the long way. */
function refusedTheLongWay(error: unknown): KeyedInsert {
  if (error instanceof PlantExistsError || error instanceof IdsExhaustedError) return LONG_WAY;
  throw error;
}

function list(reads: Reads, { limit, after, tag }: PlantQuery): PlantListing {
  const statement =
    tag === undefined
      ? after === undefined
        ? reads.pages.all
        : reads.pages.after
      : after === undefined
        ? reads.pages.tag
        : reads.pages.tagAfter;
  const row = guard(() => statement.get({ limit, after, tag })) as PageRow;
  return row.more === 0n || row.last === null
    ? { json: row.json }
    : { json: row.json, next: row.last };
}

/** The plant a conditional write acts on, read inside the write's own savepoint. */
function currentPlant(
  reads: Reads,
  id: bigint,
  expected: StoredPlant | undefined,
): StoredPlant | undefined {
  const row = reads.getOne.get(id) as StoredPlantRow | undefined;
  const plant = row && toStoredPlant(row);
  if (plant !== undefined && expected !== undefined && plant.version !== expected.version) {
    throw new PlantChangedError(id);
  }
  return plant;
}

/** Writes the audit entry of a change; answers it as the changes feed reads it back. */
function record(
  writes: Writes,
  action: AuditAction,
  id: bigint,
  before: Plant | undefined,
  after: Plant | undefined,
  by: WriteOrigin | undefined,
): EventRow {
  const entry = {
    action,
    at: Date.now(),
    plant_id: id,
    before_name: before?.name ?? null,
    before_tag: before?.tag ?? null,
    after_name: after?.name ?? null,
    after_tag: after?.tag ?? null,
  };
  const { lastInsertRowid } = writes.audit.run(
    entry.at,
    action,
    id,
    by?.tokenId ?? null,
    by?.requestId ?? null,
    entry.before_name,
    entry.before_tag,
    entry.after_name,
    entry.after_tag,
  );
  return { seq: BigInt(lastInsertRowid), ...entry };
}

/** A create, its audit entry and the settling of its key: run inside a write's savepoint. */
function insert(
  writes: Writes,
  ids: PlantIds,
  plant: NewPlant,
  { by, idempotencyKey }: InsertOptions,
  entries: EventRow[],
): StoredPlant {
  if (
    idempotencyKey &&
    writes.keyHeld.get(idempotencyKey.tokenId, idempotencyKey.key) === undefined
  ) {
    throw new KeyNotHeldError();
  }
  const created = create(writes, ids, plant);
  entries.push(record(writes, 'create', created.id, undefined, created, by));
  if (idempotencyKey !== undefined) {
    const { tokenId, key } = idempotencyKey;
    const { id, name, tag, version } = created;
    writes.settleCreated.run(id, name, tag ?? null, version, tokenId, key);
  }
  return created;
}

function create(writes: Writes, ids: PlantIds, { id, name, tag }: NewPlant): StoredPlant {
  if (id === undefined) return createWithNextId(writes, ids, name, tag ?? null);
  try {
    const plant = toStoredPlant(writes.insertWithId.get(id, name, tag ?? null) as StoredPlantRow);
    ids.taken(id);
    return plant;
  } catch (error) {
    if (isSqliteError(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) throw new PlantExistsError(id);
    throw error;
  }
}

/** A create with the first id above the counter that no plant has or had. */
function createWithNextId(
  writes: Writes,
  ids: PlantIds,
  name: string,
  tag: string | null,
): StoredPlant {
  for (;;) {
    // Not recorded as taken, so only a plant inserted by hand (SQL) can hold it: skipped too.
    const row = writes.insertIfFree.get(ids.next(), name, tag) as StoredPlantRow | undefined;
    if (row !== undefined) return toStoredPlant(row);
  }
}

function applyChange(writes: Writes, id: bigint, change: PlantChange): StoredPlant {
  return toStoredPlant(
    writes.update.get({
      id,
      name: change.name ?? null,
      setTag: change.tag === undefined ? 0 : 1,
      tag: change.tag ?? null,
    }) as StoredPlantRow,
  );
}
