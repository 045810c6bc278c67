// The two databases, as the server-assigned id tests need them: stores (instances) on one
// database, and direct access for what no store does (moving the counter, a database left at
// an older schema).

import { join } from 'node:path';
import type { TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations, type Dialect } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { migrateSqlite } from '../../src/store/sqlite/migrate.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { makeTempDir } from '../helpers/setup.js';

/** A plantstore database of schema version 3, before server-assigned ids had a counter of their own. */
export interface LegacyIds {
  /** The old counter: the largest id any plant ever had, as far as it knew. */
  high: bigint;
  /** Plants present. */
  plants: bigint[];
  /** Ids of plants since deleted, known to the audit trail only. */
  deleted: bigint[];
}

export interface IdDatabase {
  /** A store on the database (another instance, when called again); closed after the test. */
  open(): Promise<Store>;
  /** Sets the last id the server handed out, as if it had got that far. */
  setLastAssigned(id: bigint): Promise<void>;
  /** Takes `count` ids from `from` on as client creates do, in one statement. */
  takeByHand(from: bigint, count: number): Promise<void>;
  /** Fills a database left at schema version 3 (see `fresh`). */
  fillLegacy(legacy: LegacyIds): Promise<void>;
}

export interface IdBackend {
  name: Dialect;
  skip: string | false;
  /** A new database, migrated by the first `open`, or left at `version` until then. */
  fresh(t: TestContext, version?: number): Promise<IdDatabase>;
}

const migrationsUpTo = (dialect: Dialect, version: number) =>
  loadMigrations(dialect).filter((migration) => migration.version <= version);

const sqlite: IdBackend = {
  name: 'sqlite',
  skip: false,
  async fresh(t, version) {
    const file = join(makeTempDir(t), 'ids.db');
    /** Runs `work` on a connection of its own, as another process would. */
    const direct = (work: (db: Database.Database) => void) => {
      const db = new Database(file);
      try {
        db.defaultSafeIntegers(true);
        db.transaction(() => work(db)).immediate();
      } finally {
        db.close();
      }
    };
    if (version !== undefined) direct((db) => migrateSqlite(db, migrationsUpTo('sqlite', version)));
    return {
      async open() {
        const store = openSqliteStore({ file });
        t.after(() => store.close());
        return store;
      },
      async setLastAssigned(id) {
        direct((db) => db.prepare('UPDATE plant_id_counter SET last = ?').run(id));
      },
      async takeByHand(from, count) {
        direct((db) => {
          const plant = db.prepare("INSERT INTO plants (id, name) VALUES (?, 'by hand')");
          for (let id = from; id < from + BigInt(count); id++) plant.run(id);
          // One run, as client creates of these ids one after another leave it.
          db.prepare('INSERT INTO plant_id_runs (first, last) VALUES (?, ?)').run(
            from,
            from + BigInt(count) - 1n,
          );
        });
      },
      async fillLegacy({ high, plants, deleted }) {
        direct((db) => {
          for (const id of plants)
            db.prepare("INSERT INTO plants (id, name) VALUES (?, 'old')").run(id);
          for (const id of deleted) {
            db.prepare(
              "INSERT INTO audit_log (at, action, plant_id, before_name) VALUES (0, 'delete', ?, 'old')",
            ).run(id);
          }
          db.prepare("DELETE FROM sqlite_sequence WHERE name = 'plants'").run();
          db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('plants', ?)").run(high);
        });
      },
    };
  },
};

const postgres: IdBackend = {
  name: 'postgres',
  skip: POSTGRES_SKIP,
  async fresh(t, version) {
    const url = await freshDatabase(t);
    if (version !== undefined) {
      await migratePostgres(url, migrationsUpTo('postgres', version), silentLog);
    }
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    t.after(() => client.end());
    const sql = async (text: string, values: unknown[] = []) => {
      await client.query(text, values);
    };
    return {
      async open() {
        const store = await openPostgresStore({ url, poolSize: 4 });
        t.after(() => store.close());
        return store;
      },
      setLastAssigned: (id) => sql("SELECT setval('plant_id_seq', $1)", [id.toString()]),
      takeByHand: (from, count) =>
        sql(
          `WITH ids AS (SELECT generate_series($1::bigint, $1::bigint + $2 - 1) AS id),
             taken AS (INSERT INTO plant_ids_taken (id) SELECT id FROM ids)
           INSERT INTO plants (id, name) SELECT id, 'by hand' FROM ids`,
          [from.toString(), count],
        ),
      async fillLegacy({ high, plants, deleted }) {
        const text = (ids: bigint[]) => ids.map(String);
        await sql("INSERT INTO plants (id, name) SELECT unnest($1::bigint[]), 'old'", [
          text(plants),
        ]);
        await sql(
          `INSERT INTO audit_log (at, action, plant_id, before_name)
           SELECT now(), 'delete', unnest($1::bigint[]), 'old'`,
          [text(deleted)],
        );
        await sql('UPDATE plant_ids SET high = $1', [high.toString()]);
      },
    };
  },
};

export const ID_BACKENDS: readonly IdBackend[] = [sqlite, postgres];
