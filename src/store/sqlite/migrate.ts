import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Reads `migrations/<dialect>/NNNN_name.sql` from the repository, in version order. */
export function loadMigrations(dialect: 'sqlite'): Migration[] {
  const dir = fileURLToPath(new URL(`../../../migrations/${dialect}/`, import.meta.url));
  return readdirSync(dir)
    .flatMap((file) => {
      const match = MIGRATION_FILE.exec(file);
      if (match === null) return [];
      const sql = readFileSync(dir + file, 'utf8');
      return [{ version: Number(match[1]), name: match[2]!, sql }];
    })
    .sort((a, b) => a.version - b.version);
}

/**
 * Brings the database to the newest schema. Each migration runs in its own
 * IMMEDIATE transaction, so a server and a CLI starting together cannot both apply it.
 */
export function migrate(db: Database.Database, migrations: Migration[]): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const current = db
    .prepare('SELECT max(version) FROM schema_migrations')
    .pluck()
    .safeIntegers(false);
  const known = migrations.at(-1)?.version ?? 0;
  const applied = (current.get() as number | null) ?? 0;
  if (applied > known) {
    throw new Error(
      `the database schema is at version ${applied}, newer than this plantstore knows (${known}); upgrade plantstore`,
    );
  }
  const record = db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)');
  for (const migration of migrations) {
    db.transaction(() => {
      if (((current.get() as number | null) ?? 0) >= migration.version) return;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now());
    }).immediate();
  }
}
