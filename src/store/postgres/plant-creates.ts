// Plant creates on PostgreSQL (src/store/postgres/plants.ts has the other writes and the
// reads): a create without a key or with one claimed before, and one with its key in the
// same statement (PlantStore.insertWithKey); their SQL is in plant-statements.ts.
import pg from 'pg';
import type { WriteOrigin } from '../../core/audit.js';
import { keyDeadlines } from '../../core/idempotency.js';
import type { NewPlant, StoredPlant } from '../../core/plant.js';
import { claimRefusal, type KeyRow, type StoredPlantRow, toStoredPlant } from '../rows.js';
import {
  IdsExhaustedError,
  type InsertOptions,
  KeyNotHeldError,
  LONG_WAY,
  type KeyedInsert,
  type KeyedInsertOptions,
  PlantExistsError,
} from '../store.js';
import type { Query, QueryOptions } from './query.js';
import {
  INSERT_NEW,
  INSERT_NEW_AFTER_SKIP,
  INSERT_WITH_ID,
  type KeyMode,
} from './plant-statements.js';

/** The parameters afterCreate and the other audited writes take, from the write's options. */
export const origin = (by: WriteOrigin | undefined) => [
  // ISO text: pg writes a Date out in local time, field by field, at several times the cost.
  new Date().toISOString(),
  by?.tokenId ?? null,
  by?.requestId ?? null,
];

/**
 * What a create answers: the plant if one was created; with its key in the statement, the
 * key's row if one was found (Partial<KeyRow>).
 */
interface CreateRow extends Partial<StoredPlantRow>, Partial<KeyRow> {
  allowed: boolean;
  /** The id a server create drew, also when it was taken and nothing was created. */
  drawn: bigint | null;
}

/** The plant a client create made, or why it made none. */
function created(row: CreateRow, refusal: () => Error): StoredPlant {
  if (!row.allowed) throw new KeyNotHeldError();
  if (row.id === null || row.id === undefined) throw refusal();
  return toStoredPlant(row as StoredPlantRow);
}

export async function insert(
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
  if (id === undefined) {
    const row = await insertNew(query, 'held', values);
    if (!row.allowed) throw new KeyNotHeldError();
    return toStoredPlant(row as StoredPlantRow);
  }
  const { rows } = await query<CreateRow>('plants.insertWithId', INSERT_WITH_ID.held, [
    ...values,
    id.toString(),
  ]);
  return created(rows[0]!, () => new PlantExistsError(id));
}

/** PlantStore.insertWithKey: see KEY_NEW in plant-statements.ts. */
export async function insertWithKey(
  query: Query,
  { id, name, tag }: NewPlant,
  { by, claim }: KeyedInsertOptions,
): Promise<KeyedInsert> {
  const { expiresAt, leaseUntil } = keyDeadlines(claim.at);
  const values = [
    name,
    tag ?? null,
    ...origin(by),
    claim.tokenId,
    claim.key,
    claim.fingerprint,
    claim.at.toISOString(),
    new Date(expiresAt).toISOString(),
    new Date(leaseUntil).toISOString(),
  ];
  let row: CreateRow;
  try {
    row =
      id === undefined
        ? await insertNew(query, 'new', values)
        : (
            await query<CreateRow>(
              'plants.insertWithIdNewKey',
              INSERT_WITH_ID.new,
              [...values, id.toString()],
              KEY_RACE,
            )
          ).rows[0]!;
  } catch (error) {
    // Another request took the key meanwhile (KEY_NEW), or no id is left: the long way says.
    if (keyRaced(error) || error instanceof IdsExhaustedError) return LONG_WAY;
    throw error;
  }
  if (row.allowed) {
    // Not created: a client's id in use; the long way keeps the refusal.
    if (row.id === null || row.id === undefined) return LONG_WAY;
    return { state: 'created', plant: toStoredPlant(row as StoredPlantRow) };
  }
  const found = row as Partial<KeyRow>;
  if (found.fingerprint === undefined || found.fingerprint === null || found.takeable) {
    return LONG_WAY;
  }
  return claimRefusal(found as KeyRow, claim.fingerprint);
}

/** SQLSTATE unique_violation. */
const UNIQUE_VIOLATION = '23505';

/** Another request inserted the key while this statement ran (see KEY_NEW). */
const keyRaced = (error: unknown) =>
  error instanceof pg.DatabaseError &&
  error.code === UNIQUE_VIOLATION &&
  error.constraint === 'idempotency_keys_pkey';

/** Counts a statement that lost its key's race as `raced`, not as an error. */
const KEY_RACE: QueryOptions = { raced: keyRaced };

/**
 * A create with the next id of the sequence that no plant has or had: each try that draws a
 * taken id moves the sequence past the run of taken ids it starts, then tries again.
 * Answers the row of the try that created the plant, or that the key did not allow.
 */
async function insertNew(query: Query, mode: KeyMode, values: unknown[]): Promise<CreateRow> {
  let skip: bigint | undefined;
  for (;;) {
    const row = (await drawAndCreate(query, mode, values, skip))[0]!;
    if (!row.allowed || (row.id !== null && row.id !== undefined)) return row;
    skip = row.drawn!;
  }
}

/** SQLSTATE of nextval past the sequence's MAXVALUE: every id up to the int64 maximum is used. */
const SEQUENCE_EXHAUSTED = '2200H';

/** One try; `skip`, the taken id the try before drew, is skipped first. */
async function drawAndCreate(
  query: Query,
  mode: KeyMode,
  values: unknown[],
  skip: bigint | undefined,
): Promise<CreateRow[]> {
  const [suffix, options] = mode === 'new' ? ['NewKey', KEY_RACE] : ['', undefined];
  try {
    const { rows } =
      skip === undefined
        ? await query<CreateRow>(`plants.insertNew${suffix}`, INSERT_NEW[mode], values, options)
        : await query<CreateRow>(
            `plants.insertNewAfterSkip${suffix}`,
            INSERT_NEW_AFTER_SKIP[mode],
            [...values, skip.toString()],
            options,
          );
    return rows;
  } catch (error) {
    if (error instanceof pg.DatabaseError && error.code === SEQUENCE_EXHAUSTED) {
      throw new IdsExhaustedError();
    }
    throw error;
  }
}
