import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Log } from '../../core/log.js';
import {
  assertNotNewer,
  type Migration,
  type MigrationReport,
  NoDatabaseError,
} from '../migrations.js';

/**
 * The advisory lock every plantstore takes to migrate: instances starting together on an
 * empty database queue behind the first, which applies the migrations; the others find
 * nothing left to do. (A constant: 'plantstore' in ASCII.)
 */
const MIGRATION_LOCK = 0x706c616e7473746fn.toString();

/** How long a start waits for another instance's migration before giving up. */
export const MIGRATION_LOCK_WAIT_MS = 60_000;
const LOCK_POLL_MS = 200;

/**
 * Brings the database (the schema first on the connection's search_path) to the newest
 * version, each migration in its own transaction. Runs on a connection of its own, without
 * the request timeouts: a migration may legitimately take longer than a request. With
 * `create` false, a database plantstore never migrated is refused (NoDatabaseError).
 */
export async function migratePostgres(
  url: string,
  migrations: Migration[],
  log: Log,
  { create = true }: { create?: boolean } = {},
): Promise<MigrationReport> {
  const client = new pg.Client({ connectionString: url, application_name: 'plantstore migrate' });
  // A connection lost mid-migration must fail the migration (its query fails too), not
  // crash the process.
  client.on('error', (error) => {
    log.warn({ err: error }, 'the PostgreSQL migration connection failed');
  });
  await client.connect();
  try {
    await assertUtf8(client);
    if (!create) await assertMigrated(client);
    await lock(client);
    try {
      return await migrateLocked(client, migrations, log);
    } finally {
      await client
        .query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
        .catch((error: unknown) => {
          log.warn(
            { err: error },
            'releasing the migration lock failed; ending the session releases it',
          );
        });
    }
  } finally {
    // Ending the session releases the lock too, should the unlock above have failed.
    await client.end().catch((error: unknown) => {
      log.warn({ err: error }, 'closing the PostgreSQL migration connection failed');
    });
  }
}

async function assertUtf8(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ server_encoding: string }>('SHOW server_encoding');
  if (rows[0]?.server_encoding !== 'UTF8') {
    throw new Error(
      `the database encoding is ${rows[0]?.server_encoding}; plantstore needs UTF8 (createdb -E UTF8 -T template0)`,
    );
  }
}

async function assertMigrated(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ migrated: boolean; db: string; schema: string | null }>(
    `SELECT to_regclass('schema_migrations') IS NOT NULL AS migrated,
            current_database() AS db, current_schema() AS schema`,
  );
  const { migrated, db, schema } = rows[0]!;
  if (migrated) return;
  const where =
    schema === null ? ', where no schema of the search_path exists' : `, schema "${schema}"`;
  throw new NoDatabaseError(`in PostgreSQL database "${db}"${where}`);
}

/** Applies the migrations the database lacks; the caller holds the migration lock. */
async function migrateLocked(
  client: pg.Client,
  migrations: Migration[],
  log: Log,
): Promise<MigrationReport> {
  await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`);
  const version = async () =>
    (
      await client.query<{ v: number }>(
        'SELECT coalesce(max(version), 0) AS v FROM schema_migrations',
      )
    ).rows[0]!.v;
  const from = await version();
  assertNotNewer(from, migrations);
  const done = new Set(
    (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
      (row) => row.version,
    ),
  );
  const applied: number[] = [];
  for (const migration of migrations) {
    // Each version by itself, not "everything above the highest": a database that got a
    // later version first (a development branch) still gets the one it skipped.
    if (done.has(migration.version)) continue;
    await apply(client, migration, log);
    applied.push(migration.version);
  }
  return { from, version: await version(), applied };
}

/**
 * The statement that records `migration` as applied; also run by a restore, in its own
 * transaction (backup.ts). Literal values: a version is a number and a name matches
 * [a-z0-9_]+ (migrations.ts reads no other file).
 */
export const recordMigration = (migration: Migration) =>
  `INSERT INTO schema_migrations VALUES (${migration.version}, '${migration.name}', now())`;

/** Applies one migration and records it, in one transaction. */
async function apply(client: pg.Client, migration: Migration, log: Log): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(migration.sql);
    await client.query(recordMigration(migration));
    await client.query('COMMIT');
  } catch (error) {
    // The migration's own error is the one to throw; a failed ROLLBACK (the connection is
    // gone, most likely) is only logged: the transaction ends with the session anyway.
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      log.warn(
        { err: rollbackError, migration: migration.version },
        'rolling back a failed migration failed',
      );
    });
    throw error;
  }
}

/** Takes the migration lock, waiting for another instance's migration a bounded time. */
async function lock(client: pg.Client): Promise<void> {
  const deadline = Date.now() + MIGRATION_LOCK_WAIT_MS;
  for (;;) {
    const { rows } = await client.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_lock($1) AS locked',
      [MIGRATION_LOCK],
    );
    if (rows[0]?.locked) return;
    if (Date.now() > deadline) {
      const holder = await client.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
        [MIGRATION_LOCK],
      );
      throw new Error(
        `another plantstore has been migrating the database for over ${MIGRATION_LOCK_WAIT_MS / 1000} s (server pid ${holder.rows[0]?.pid ?? 'unknown'}); try again later`,
      );
    }
    await sleep(LOCK_POLL_MS);
  }
}
