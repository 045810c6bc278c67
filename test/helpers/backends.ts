import { join } from 'node:path';
import type { TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, POSTGRES_SKIP } from './postgres.js';
import { makeTempDir } from './temp-dir.js';

// The databases a suite runs on, as kysely loops its dialects (test/node/src/test-setup.ts
// there): SQLite always, PostgreSQL when PLANTSTORE_TEST_DATABASE_URL names one (skipped,
// and said so, when it does not). Real databases both, no mocks.

/** A new, empty database for one test. */
export interface TestDatabase {
  /** The database as the CLI names it: `--db <file>` or `--database-url <url>`. */
  args: string[];
  /** Opens (creating and migrating) a store on it; the caller closes it. */
  open(): Promise<Store>;
  /**
   * Sets the last id the server handed out, as if it had got that far (each database keeps
   * it its own way: a counter row, a sequence). The store must have migrated it first.
   */
  setLastAssigned(id: bigint): Promise<void>;
}

export interface Backend {
  name: 'SQLite' | 'PostgreSQL';
  /** Why the suite is skipped here, or false. */
  skip: string | false;
  /** A database of its own for the test (a file, a schema), removed after it. */
  fresh(t: TestContext): Promise<TestDatabase>;
}

/** The SQLite database in `file`. */
export function sqliteDatabase(file: string): TestDatabase {
  return {
    args: ['--db', file],
    open: async () => openSqliteStore({ file }),
    async setLastAssigned(id) {
      const db = new Database(file);
      try {
        db.prepare('UPDATE plant_id_counter SET last = ?').run(id);
      } finally {
        db.close();
      }
    },
  };
}

/** The PostgreSQL database (and schema) `url` names. */
export function postgresDatabase(url: string): TestDatabase {
  return {
    args: ['--database-url', url],
    open: () => openPostgresStore({ url }),
    async setLastAssigned(id) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query("SELECT setval('plant_id_seq', $1)", [id.toString()]);
      } finally {
        await client.end();
      }
    },
  };
}

export const SQLITE: Backend = {
  name: 'SQLite',
  skip: false,
  fresh: async (t) => sqliteDatabase(join(makeTempDir(t), 'test.db')),
};

export const POSTGRES: Backend = {
  name: 'PostgreSQL',
  skip: POSTGRES_SKIP,
  fresh: async (t) => postgresDatabase(await freshDatabase(t)),
};

export const BACKENDS: readonly Backend[] = [SQLITE, POSTGRES];
