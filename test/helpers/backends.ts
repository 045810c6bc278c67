import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { Dialect } from '../../src/store/migrations.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Durability, Store } from '../../src/store/store.js';
import { leftOut } from './backend-filter.js';
import type { Cleanups } from './cleanups.js';
import { dropSchema, giveBack, migratedInPlace, newSchema } from './migrated-schemas.js';
import { POSTGRES_SKIP, POSTGRES_URL, withSchema } from './postgres.js';
import { makeTempDir } from './temp-dir.js';

// The databases a suite that writes runs on, in one loop, as kysely loops its dialects
// (test/node/src/test-setup.ts there): SQLite, and PostgreSQL when
// PLANTSTORE_TEST_DATABASE_URL names one (skipped, and said so, when it does not);
// PLANTSTORE_TEST_BACKENDS narrows them (backend-filter.ts). Real databases both, no mocks.

export interface StoreOptions {
  durability?: Durability;
  /** PostgreSQL: the connections the store keeps at most (SQLite has one). */
  poolSize?: number;
}

interface DatabaseAccess {
  /** The database as the CLI names it: `--db <file>` or `--database-url <url>`. */
  args: string[];
  /**
   * Opens (creating and migrating) a store on it: another instance at each call, as another
   * process would be. Closed after the test, if the test has not closed it (twice is harmless).
   */
  open(options?: StoreOptions): Promise<Store>;
  /**
   * Runs `sql` on a connection of the test's own, outside any store: the rows it answers.
   * Placeholders are the database's own (`?` for SQLite, `$1` for PostgreSQL).
   */
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>;
  /**
   * Sets the last id the server handed out, as if it had got that far (each database keeps
   * it its own way: a counter row, a sequence). The store must have migrated it first.
   */
  setLastAssigned(id: bigint): Promise<void>;
}

/** A new, empty database for one test. */
export type TestDatabase =
  | (DatabaseAccess & { dialect: 'sqlite'; file: string })
  | (DatabaseAccess & { dialect: 'postgres'; url: string });

export interface Backend {
  name: 'SQLite' | 'PostgreSQL';
  dialect: Dialect;
  /** Why the backend's tests are skipped here, or false. */
  skip: string | false;
  /** A database of its own for the test (a file, a schema), removed after it. */
  fresh(t: Cleanups): Promise<TestDatabase>;
}

let template: Promise<string> | undefined;

/**
 * A SQLite database migrated to the newest version, made once per test process: a store
 * opened on a file that does not exist yet starts from a copy of it, instead of running
 * every migration again (and an fsync for each) for every test. The migrations themselves
 * are tested from an empty file in store-sqlite.test.ts.
 */
function migratedTemplate(): Promise<string> {
  template ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-template-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'migrated.db');
    await openSqliteStore({ file }).close();
    return file;
  })();
  return template;
}

/** The SQLite database in `file`. */
export function sqliteDatabase(t: Cleanups, file: string): TestDatabase {
  const query = async <R>(sql: string, params: unknown[] = []): Promise<R[]> => {
    const db = new Database(file);
    try {
      const statement = db.prepare(sql);
      if (statement.reader) return statement.all(...params) as R[];
      statement.run(...params);
      return [];
    } finally {
      db.close();
    }
  };
  return {
    dialect: 'sqlite',
    file,
    args: ['--db', file],
    async open(options = {}) {
      if (!existsSync(file)) copyFileSync(await migratedTemplate(), file);
      const store = openSqliteStore({ file, durability: options.durability });
      t.after(() => store.close());
      return store;
    },
    query,
    async setLastAssigned(id) {
      await query('UPDATE plant_id_counter SET last = ?', [id]);
    },
  };
}

/**
 * The PostgreSQL database (and schema) `url` names. `beforeOpen` runs before each store opens
 * (POSTGRES puts a migrated schema in place of an empty one there).
 */
export function postgresDatabase(
  t: Cleanups,
  url: string,
  beforeOpen?: () => Promise<void>,
): TestDatabase {
  let client: Promise<pg.Client> | undefined;
  const connected = () =>
    (client ??= (async () => {
      const opened = new pg.Client({ connectionString: url });
      await opened.connect();
      t.after(() => opened.end());
      return opened;
    })());
  const query = async <R>(sql: string, params: unknown[] = []): Promise<R[]> =>
    (await (await connected()).query(sql, params)).rows as R[];
  return {
    dialect: 'postgres',
    url,
    args: ['--database-url', url],
    async open(options = {}) {
      await beforeOpen?.();
      const store = await openPostgresStore({ url, ...options });
      t.after(() => store.close());
      return store;
    },
    query,
    async setLastAssigned(id) {
      await query("SELECT setval('plant_id_seq', $1)", [id.toString()]);
    },
  };
}

export const SQLITE: Backend = {
  name: 'SQLite',
  dialect: 'sqlite',
  skip: leftOut('sqlite'),
  fresh: async (t) => sqliteDatabase(t, join(makeTempDir(t), 'test.db')),
};

export const POSTGRES: Backend = {
  name: 'PostgreSQL',
  dialect: 'postgres',
  skip: POSTGRES_SKIP,
  async fresh(t) {
    // A schema of the test's own. A store opened on it while it is still empty opens on a
    // migrated schema put in its place (migrated-schemas.ts), given back after the test.
    const schema = await newSchema();
    let swap: Promise<boolean> | undefined;
    t.after(async () => ((await swap) ? giveBack(schema) : dropSchema(schema)));
    return postgresDatabase(t, withSchema(POSTGRES_URL!, schema), async () => {
      swap ??= migratedInPlace(schema);
      await swap;
    });
  },
};

/** Every backend, those skipped here included (their suites say why). */
export const BACKENDS: readonly Backend[] = [SQLITE, POSTGRES];

/**
 * The one backend loop: declares `suite` once for each backend, in a describe named after it
 * (skipped, and saying why, where the backend is not available or not asked for).
 */
export function forEachBackend(suite: (backend: Backend) => void): void;
/** The same, each backend's describe with `options` (a timeout for each). */
export function forEachBackend(options: SuiteOptions, suite: (backend: Backend) => void): void;
export function forEachBackend(
  first: SuiteOptions | ((backend: Backend) => void),
  second?: (backend: Backend) => void,
): void {
  const [options, suite] = typeof first === 'function' ? [{}, first] : [first, second!];
  for (const backend of BACKENDS) {
    describe(backend.name, { ...options, skip: backend.skip }, () => suite(backend));
  }
}

export interface SuiteOptions {
  /** The time each backend's tests may take together, in ms. */
  timeout?: number;
}
