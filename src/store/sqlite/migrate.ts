import type Database from 'better-sqlite3';
import { assertNotNewer, type Migration, type MigrationReport } from '../migrations.js';

/**
 * Brings the database to the newest schema, applying every version it lacks in order. Each
 * migration runs in its own IMMEDIATE transaction, so a server and a CLI starting together
 * cannot both apply it.
 */
export function migrateSqlite(db: Database.Database, migrations: Migration[]): MigrationReport {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const current = db
    .prepare('SELECT max(version) FROM schema_migrations')
    .pluck()
    .safeIntegers(false);
  const version = () => (current.get() as number | null) ?? 0;
  const from = version();
  assertNotNewer(from, migrations);
  const record = db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)');
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?');
  const applied: number[] = [];
  for (const migration of migrations) {
    db.transaction(() => {
      // Each version by itself, not "everything above the highest": a database that got a
      // later version first (a development branch) still gets the one it skipped.
      if (isApplied.get(migration.version) !== undefined) return;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now());
      applied.push(migration.version);
    }).immediate();
  }
  return { from, version: version(), applied };
}
