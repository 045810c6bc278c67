import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { INT64_MAX } from '../../core/int64.js';
import type { NewPlant, PlantChange, PlantQuery } from '../../core/plant.js';
import type { TokenRecord } from '../../core/tokens.js';
import {
  IdsExhaustedError,
  type NewToken,
  PlantExistsError,
  type PlantStore,
  type RevokeOutcome,
  type Store,
  type TokenStore,
} from '../store.js';
import { loadMigrations, migrate } from './migrate.js';
import { type PlantRow, type TokenRow, toPlant, toToken } from './rows.js';

export interface SqliteOptions {
  /** Path of the database file; created with its directory if missing. */
  file: string;
}

/** Opens (creating and migrating if needed) a SQLite database as a Store. */
export function openSqliteStore({ file }: SqliteOptions): Store {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  try {
    // WAL with synchronous=NORMAL: a committed transaction is in the WAL file before
    // the call returns, so it survives the process being killed (not power loss).
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.defaultSafeIntegers(true);
    migrate(db, loadMigrations('sqlite'));
  } catch (error) {
    db.close();
    throw error;
  }
  const plants = sqlitePlants(db);
  const tokens = sqliteTokens(db);
  const ping = db.prepare('SELECT 1');
  return {
    plants,
    tokens,
    async ping() {
      ping.get();
    },
    async close() {
      if (db.open) db.close();
    },
  };
}

function isSqliteError(error: unknown, code: string): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}

function sqlitePlants(db: Database.Database): PlantStore {
  const columns = 'id, name, tag';
  const insertWithId = db.prepare(
    `INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) RETURNING ${columns}`,
  );
  const insertNew = db.prepare(`INSERT INTO plants (name, tag) VALUES (?, ?) RETURNING ${columns}`);
  const largestAssigned = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'plants'");
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
    async insert({ id, name, tag }: NewPlant) {
      try {
        const row = (
          id === undefined
            ? insertNew.get(name, tag ?? null)
            : insertWithId.get(id, name, tag ?? null)
        ) as PlantRow;
        return toPlant(row);
      } catch (error) {
        if (id !== undefined && isSqliteError(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) {
          throw new PlantExistsError(id);
        }
        // AUTOINCREMENT reports SQLITE_FULL once the largest id ever used is INT64_MAX.
        if (id === undefined && isSqliteError(error, 'SQLITE_FULL')) {
          const seq = largestAssigned.pluck().get() as bigint | undefined;
          if (seq === INT64_MAX) throw new IdsExhaustedError();
        }
        throw error;
      }
    },
    async get(id: bigint) {
      const row = getOne.get(id) as PlantRow | undefined;
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
      const rows = statement.all({ limit, after, tag }) as PlantRow[];
      return rows.map(toPlant);
    },
    async update(id: bigint, change: PlantChange) {
      const row = update.get({
        id,
        name: change.name ?? null,
        setTag: change.tag === undefined ? 0 : 1,
        tag: change.tag ?? null,
      }) as PlantRow | undefined;
      return row && toPlant(row);
    },
    async delete(id: bigint) {
      return remove.run(id).changes > 0;
    },
  };
}

function sqliteTokens(db: Database.Database): TokenStore {
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
      const row = byHash.get(hash) as TokenRow | undefined;
      return row && toToken(row);
    },
    async list() {
      return (all.all() as TokenRow[]).map(toToken);
    },
    async revoke(id: number, at: Date): Promise<RevokeOutcome> {
      if (revoke.run(at.getTime(), id).changes > 0) return 'revoked';
      return exists.get(id) === undefined ? 'not-found' : 'already-revoked';
    },
    async touch(id: number, at: Date) {
      touch.run(at.getTime(), id);
    },
  };
}
