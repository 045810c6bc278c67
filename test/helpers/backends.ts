import { join } from 'node:path';
import type { TestContext } from 'node:test';
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
}

export interface Backend {
  name: 'SQLite' | 'PostgreSQL';
  /** Why the suite is skipped here, or false. */
  skip: string | false;
  /** A database of its own for the test (a file, a schema), removed after it. */
  fresh(t: TestContext): Promise<TestDatabase>;
}

export const SQLITE: Backend = {
  name: 'SQLite',
  skip: false,
  fresh: async (t) => {
    const file = join(makeTempDir(t), 'test.db');
    return { args: ['--db', file], open: async () => openSqliteStore({ file }) };
  },
};

export const POSTGRES: Backend = {
  name: 'PostgreSQL',
  skip: POSTGRES_SKIP,
  fresh: async (t) => {
    const url = await freshDatabase(t);
    return { args: ['--database-url', url], open: () => openPostgresStore({ url }) };
  },
};

export const BACKENDS: readonly Backend[] = [SQLITE, POSTGRES];
