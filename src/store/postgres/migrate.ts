import type pg from 'pg';
import { assertNotNewer, type Migration, type MigrationReport } from '../migrations.js';

/**
 * The advisory lock every plantstore takes to migrate: instances starting together on an
 * empty database queue behind the first, which applies the migrations; the others find
 * nothing left to do. (A constant: 'plantstore' in ASCII.)
 */
const MIGRATION_LOCK = 0x706c616e7473746fn;

/**
 * Brings the database (the schema first on the connection's search_path) to the newest
 * version, each migration in its own transaction.
 */
export async function migratePostgres(
  pool: pg.Pool,
  migrations: Migration[],
): Promise<MigrationReport> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`);
      const version = async () =>
        Number(
          (
            await client.query<{ v: number }>(
              'SELECT coalesce(max(version), 0) AS v FROM schema_migrations',
            )
          ).rows[0]!.v,
        );
      const current = await version();
      assertNotNewer(current, migrations);
      const applied: number[] = [];
      for (const migration of migrations) {
        if (migration.version <= current) continue;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations VALUES ($1, $2, now())', [
            migration.version,
            migration.name,
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
        applied.push(migration.version);
      }
      return { version: await version(), applied };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()]);
    }
  } finally {
    client.release();
  }
}
