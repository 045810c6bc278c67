// The two databases, as the server-assigned id tests need them: stores (instances) on one
// database, and direct access for what no store does (moving the counter, a database left at
// an older schema).

import type { Cleanups } from '../helpers/cleanups.js';
import Database from 'better-sqlite3';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations, type Dialect } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { migrateSqlite } from '../../src/store/sqlite/migrate.js';
import type { Store } from '../../src/store/store.js';
import type { Backend, TestDatabase } from '../helpers/backends.js';

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

const migrationsUpTo = (dialect: Dialect, version: number) =>
  loadMigrations(dialect).filter((migration) => migration.version <= version);

/**
 * A new database of `backend`, migrated by the first `open`, or left at schema `version`
 * until then.
 */
export async function idDatabase(
  t: Cleanups,
  backend: Backend,
  version?: number,
): Promise<IdDatabase> {
  const db = await backend.fresh(t);
  return db.dialect === 'sqlite' ? sqlite(db, version) : postgres(db, version);
}

function sqlite(db: TestDatabase & { dialect: 'sqlite' }, version?: number): IdDatabase {
  /** Runs `work` on a connection of its own, as another process would. */
  const direct = (work: (connection: Database.Database) => void) => {
    const connection = new Database(db.file);
    try {
      connection.defaultSafeIntegers(true);
      connection.transaction(() => work(connection)).immediate();
    } finally {
      connection.close();
    }
  };
  if (version !== undefined) {
    direct((connection) => migrateSqlite(connection, migrationsUpTo('sqlite', version)));
  }
  return {
    open: () => db.open(),
    setLastAssigned: (id) => db.setLastAssigned(id),
    async takeByHand(from, count) {
      direct((connection) => {
        const plant = connection.prepare("INSERT INTO plants (id, name) VALUES (?, 'by hand')");
        for (let id = from; id < from + BigInt(count); id++) plant.run(id);
        // One run, as client creates of these ids one after another leave it.
        connection
          .prepare('INSERT INTO plant_id_runs (first, last) VALUES (?, ?)')
          .run(from, from + BigInt(count) - 1n);
      });
    },
    async fillLegacy({ high, plants, deleted }) {
      direct((connection) => {
        for (const id of plants)
          connection.prepare("INSERT INTO plants (id, name) VALUES (?, 'old')").run(id);
        for (const id of deleted) {
          connection
            .prepare(
              "INSERT INTO audit_log (at, action, plant_id, before_name) VALUES (0, 'delete', ?, 'old')",
            )
            .run(id);
        }
        connection.prepare("DELETE FROM sqlite_sequence WHERE name = 'plants'").run();
        connection
          .prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('plants', ?)")
          .run(high);
      });
    },
  };
}

async function postgres(
  db: TestDatabase & { dialect: 'postgres' },
  version?: number,
): Promise<IdDatabase> {
  if (version !== undefined) {
    await migratePostgres(db.url, migrationsUpTo('postgres', version), silentLog);
  }
  const sql = async (text: string, values: unknown[] = []) => {
    await db.query(text, values);
  };
  return {
    open: () => db.open({ poolSize: 4 }),
    setLastAssigned: (id) => db.setLastAssigned(id),
    takeByHand: (from, count) =>
      sql(
        `WITH ids AS (SELECT generate_series($1::bigint, $1::bigint + $2 - 1) AS id),
           taken AS (INSERT INTO plant_ids_taken (id) SELECT id FROM ids)
         INSERT INTO plants (id, name) SELECT id, 'by hand' FROM ids`,
        [from.toString(), count],
      ),
    async fillLegacy({ high, plants, deleted }) {
      const text = (ids: bigint[]) => ids.map(String);
      await sql("INSERT INTO plants (id, name) SELECT unnest($1::bigint[]), 'old'", [text(plants)]);
      await sql(
        `INSERT INTO audit_log (at, action, plant_id, before_name)
         SELECT now(), 'delete', unnest($1::bigint[]), 'old'`,
        [text(deleted)],
      );
      await sql('UPDATE plant_ids SET high = $1', [high.toString()]);
    },
  };
}
