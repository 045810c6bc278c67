import Database from 'better-sqlite3';
import type { AuditAction, AuditQuery, WriteOrigin } from '../../core/audit.js';
import type { ErrorBody } from '../../core/errors.js';
import {
  type ClaimedKey,
  type ClaimOutcome,
  IDEMPOTENCY_KEY_TTL_MS,
  IDEMPOTENCY_LEASE_MS,
  type IdempotencyClaim,
} from '../../core/idempotency.js';
import { INT64_MAX, INT64_MIN } from '../../core/int64.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../../core/plant.js';
import type { TokenRecord } from '../../core/tokens.js';
import {
  type AuditStore,
  type ConditionalWriteOptions,
  type Durability,
  type IdempotencyStore,
  type InsertOptions,
  KeyNotHeldError,
  IdsExhaustedError,
  type NewToken,
  PlantChangedError,
  PlantExistsError,
  type PlantStore,
  samePlant,
  StoreUnavailableError,
  type RevokeOutcome,
  type Store,
  type TokenStore,
} from '../store.js';
import { GroupCommit } from './group-commit.js';
import { createPrivately } from './private-files.js';
import { loadMigrations, type MigrationReport } from '../migrations.js';
import { migrate } from './migrate.js';
import {
  AUDIT_COLUMNS,
  type AuditRow,
  claimRefusal,
  type KeyRow,
  type PlantRow,
  TAKE_KEY,
  toAuditEntry,
  toPlant,
} from '../rows.js';
import { type TokenRow, toToken } from './rows.js';

export interface SqliteOptions {
  /** Path of the database file; created (0600) with its directory (0700) if missing. */
  file: string;
  durability?: Durability;
}

/** Opens (creating and migrating if needed) a SQLite database as a Store. */
export function openSqliteStore({ file, durability = 'power' }: SqliteOptions): Store {
  if (file !== ':memory:') createPrivately(file);
  const db = new Database(file);
  let migration: MigrationReport;
  try {
    // In WAL mode, FULL fsyncs the WAL at every commit; NORMAL leaves committed
    // transactions in the OS page cache, which outlives the process but not the machine.
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'power' ? 'FULL' : 'NORMAL'}`);
    // better-sqlite3 waits for a lock synchronously, stalling every request meanwhile:
    // wait briefly, then answer 503 (StoreUnavailableError) and let the client retry.
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.defaultSafeIntegers(true);
    migration = migrate(db, loadMigrations('sqlite'));
  } catch (error) {
    db.close();
    throw error;
  }
  const batches = new GroupCommit(db);
  const plants = sqlitePlants(db, batches);
  const tokens = sqliteTokens(db, batches);
  const audit = sqliteAudit(db);
  const idempotency = sqliteIdempotency(db, batches);
  // Reads a page of the file, so a locked or broken database fails the ping.
  const ping = db.prepare('SELECT max(version) FROM schema_migrations');
  return {
    plants,
    tokens,
    audit,
    idempotency,
    migration,
    async ping() {
      guard(() => ping.get());
    },
    async close() {
      if (!db.open) return;
      batches.flushAll();
      db.close();
    },
  };
}

/** How long a write waits for a lock another process holds before giving up. */
export const BUSY_TIMEOUT_MS = 200;

function isSqliteError(error: unknown, code: string): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}

// Errors that say the database cannot be used right now, rather than that the request is wrong.
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL|READONLY)/;

function translate(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE.test(code)
    ? new StoreUnavailableError(error)
    : error;
}

/** Runs synchronous database work, turning "cannot use the database" into StoreUnavailableError. */
function guard<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw translate(error);
  }
}

/**
 * Runs synchronous database work in the next group-commit batch (see group-commit.ts), with
 * "cannot use the database" turned into StoreUnavailableError as `guard` does.
 */
function batchedWrites(batches: GroupCommit) {
  return <T>(work: () => T): Promise<T> =>
    batches.run(work).catch((error: unknown) => {
      throw translate(error);
    });
}

function sqlitePlants(db: Database.Database, batches: GroupCommit): PlantStore {
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

function sqliteAudit(db: Database.Database): AuditStore {
  return {
    async list({ since, plantId, afterSeq, limit }: AuditQuery) {
      // Built per call: this serves the audit command, not requests, and a statement per
      // filter combination lets SQLite use the index that fits.
      const where = ['seq > @afterSeq'];
      if (since !== undefined) where.push('at >= @since');
      if (plantId !== undefined) where.push('plant_id = @plantId');
      const statement = db.prepare(
        `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')}
         ORDER BY seq LIMIT @limit`,
      );
      const rows = guard(() =>
        statement.all({
          afterSeq: afterSeq ?? INT64_MIN,
          since: since?.getTime() ?? null,
          plantId: plantId ?? null,
          limit,
        }),
      ) as (AuditRow & { at: bigint })[];
      return rows.map((row) => toAuditEntry(row, new Date(Number(row.at))));
    },
  };
}

function sqliteIdempotency(db: Database.Database, batches: GroupCommit): IdempotencyStore {
  const write = batchedWrites(batches);
  // A new key is inserted, an expired or abandoned one taken over (TAKE_KEY).
  const take = db.prepare(
    `INSERT INTO idempotency_keys AS k
       (token_id, key, fingerprint, created_at, expires_at, lease_until)
     VALUES (@tokenId, @key, @fingerprint, @at, @expiresAt, @leaseUntil)
     ${TAKE_KEY}`,
  );
  const read = db.prepare(
    `SELECT fingerprint, status, plant_id, plant_name, plant_tag, error_code, error_message
     FROM idempotency_keys WHERE token_id = ? AND key = ?`,
  );
  const purge = db.prepare(
    `DELETE FROM idempotency_keys WHERE rowid IN
       (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ${PURGE_BATCH})`,
  );
  const settle = db.prepare(
    `UPDATE idempotency_keys SET status = ?, error_code = ?, error_message = ?
     WHERE token_id = ? AND key = ? AND status IS NULL`,
  );
  const release = db.prepare(
    'DELETE FROM idempotency_keys WHERE token_id = ? AND key = ? AND status IS NULL',
  );
  return {
    claim: ({ tokenId, key, fingerprint, at }: IdempotencyClaim) =>
      write((): ClaimOutcome => {
        const now = at.getTime();
        purge.run(now);
        const taken = take.get({
          tokenId,
          key,
          fingerprint,
          at: now,
          expiresAt: now + IDEMPOTENCY_KEY_TTL_MS,
          leaseUntil: now + IDEMPOTENCY_LEASE_MS,
        });
        if (taken !== undefined) return { state: 'claimed' };
        return claimRefusal(read.get(tokenId, key) as KeyRow, fingerprint);
      }),
    settle: ({ tokenId, key }: ClaimedKey, status: number, error: ErrorBody) =>
      write(() => void settle.run(status, error.error, error.message, tokenId, key)),
    release: ({ tokenId, key }: ClaimedKey) => write(() => void release.run(tokenId, key)),
  };
}

/** Expired keys one claim deletes at most: keeps the table from growing without a job. */
const PURGE_BATCH = 100;

function sqliteTokens(db: Database.Database, batches: GroupCommit): TokenStore {
  const write = batchedWrites(batches);
  const columns = 'id, name, hash, scopes, created_at, expires_at, last_used_at, revoked_at';
  const insert = db.prepare(
    `INSERT INTO tokens (name, hash, scopes, created_at, expires_at)
     VALUES (?, ?, ?, ?, ?) RETURNING ${columns}`,
  );
  const byHash = db.prepare(`SELECT ${columns} FROM tokens WHERE hash = ?`);
  const all = db.prepare(`SELECT ${columns} FROM tokens ORDER BY id`);
  const revoke = db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  const exists = db.prepare('SELECT 1 FROM tokens WHERE id = ?');
  const touch = db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?');

  return {
    async create(token: NewToken): Promise<TokenRecord> {
      const row = insert.get(
        token.name,
        token.hash,
        token.scopes.join(' '),
        token.createdAt.getTime(),
        token.expiresAt?.getTime() ?? null,
      ) as TokenRow;
      return toToken(row);
    },
    async findByHash(hash: string) {
      const row = guard(() => byHash.get(hash)) as TokenRow | undefined;
      return row && toToken(row);
    },
    async list() {
      return (all.all() as TokenRow[]).map(toToken);
    },
    async revoke(id: number, at: Date): Promise<RevokeOutcome> {
      if (revoke.run(at.getTime(), id).changes > 0) return 'revoked';
      return exists.get(id) === undefined ? 'not-found' : 'already-revoked';
    },
    // Through the group commit: it shares a batch's transaction and fsync instead of
    // paying for its own.
    async touch(id: number, at: Date) {
      await write(() => touch.run(at.getTime(), id));
    },
  };
}
