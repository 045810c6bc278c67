import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { INT64_MAX } from '../../core/int64.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../../core/plant.js';
import type { TokenRecord } from '../../core/tokens.js';
import {
  type Durability,
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
import { loadMigrations, type MigrationReport } from '../migrations.js';
import { migrate } from './migrate.js';
import { type PlantRow, toPlant } from '../rows.js';
import { type TokenRow, toToken } from './rows.js';

export interface SqliteOptions {
  /** Path of the database file; created with its directory if missing. */
  file: string;
  durability?: Durability;
}

/** Opens (creating and migrating if needed) a SQLite database as a Store. */
export function openSqliteStore({ file, durability = 'power' }: SqliteOptions): Store {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
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
  // Reads a page of the file, so a locked or broken database fails the ping.
  const ping = db.prepare('SELECT max(version) FROM schema_migrations');
  return {
    plants,
    tokens,
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

function sqlitePlants(db: Database.Database, batches: GroupCommit): PlantStore {
  const write = <T>(work: () => T): Promise<T> =>
    batches.run(work).catch((error: unknown) => {
      throw translate(error);
    });
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
  const page = (where: string) =>
    db.prepare(`SELECT ${columns} FROM plants ${where} ORDER BY id LIMIT @limit`);
  const pages = {
    all: page(''),
    after: page('WHERE id > @after'),
    tag: page('WHERE tag = @tag'),
    tagAfter: page('WHERE tag = @tag AND id > @after'),
  };

  return {
    insert: ({ id, name, tag }: NewPlant) =>
      write(() => {
        if (id === undefined) {
          // Checked first: SQLite answers exhaustion with SQLITE_FULL, which may roll back
          // the whole transaction, and with it the other writes of the batch.
          if (largestAssigned.get() === INT64_MAX) throw new IdsExhaustedError();
          return toPlant(insertNew.get(name, tag ?? null) as PlantRow);
        }
        try {
          return toPlant(insertWithId.get(id, name, tag ?? null) as PlantRow);
        } catch (error) {
          if (isSqliteError(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) throw new PlantExistsError(id);
          throw error;
        }
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
    update: (id: bigint, change: PlantChange, expected?: Plant) =>
      write(() => {
        if (expected !== undefined) assertUnchanged(id, expected);
        const row = update.get({
          id,
          name: change.name ?? null,
          setTag: change.tag === undefined ? 0 : 1,
          tag: change.tag ?? null,
        }) as PlantRow | undefined;
        return row && toPlant(row);
      }),
    delete: (id: bigint, expected?: Plant) =>
      write(() => {
        if (expected !== undefined) assertUnchanged(id, expected);
        return remove.run(id).changes > 0;
      }),
  };

  /** Inside the write's own savepoint, so the check and the write are one step. */
  function assertUnchanged(id: bigint, expected: Plant): void {
    const row = getOne.get(id) as PlantRow | undefined;
    if (row !== undefined && !samePlant(toPlant(row), expected)) throw new PlantChangedError(id);
  }
}

function sqliteTokens(db: Database.Database, batches: GroupCommit): TokenStore {
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
      await batches
        .run(() => touch.run(at.getTime(), id))
        .catch((error: unknown) => {
          throw translate(error);
        });
    },
  };
}
