// Backing up and restoring a PostgreSQL store with PostgreSQL's own tools (pg-tools.ts):
// pg_dump writes the backup; pg_restore reads it and psql applies it, in one transaction that
// also migrates an older backup and carries the store's counters on past the replaced store's,
// as `restore` does on SQLite (sqlite/backup.ts).

import { closeSync, existsSync, linkSync, openSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import pg from 'pg';
import {
  BackupError,
  BackupInterrupted,
  type BackupReport,
  type RestoreReport,
  removeDeadCopies,
  syncDirectoryOf,
} from '../backup.js';
import { loadMigrations, type Migration } from '../migrations.js';
import { recordMigration } from './migrate.js';
import { SERVING_APPLICATION } from './open.js';
import { dumpTo, restoreThroughPsql, runTool, toolConnection } from './pg-tools.js';
import {
  carry,
  countersReached,
  keepTakenIds,
  NOTHING_REACHED,
  takeKeptIds,
} from './restore-carry.js';

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The versions in schema_migrations rows, each checked against this plantstore's migrations by
 * version and name: another tool's table by that name, or a newer plantstore's, is refused.
 */
function appliedMigrations(rows: { version: string; name: string }[], where: string): Set<number> {
  const migrations = loadMigrations('postgres');
  const applied = new Set<number>();
  for (const { version, name } of rows) {
    const known = migrations.find((m) => String(m.version) === version);
    if (known === undefined && /^\d{1,4}$/.test(version))
      throw new BackupError(
        `${where} holds a store at schema version ${version}, newer than this plantstore knows; upgrade plantstore`,
      );
    if (known?.name !== name)
      throw new BackupError(
        `${where} holds another tool's schema_migrations, not a plantstore store`,
      );
    applied.add(known.version);
  }
  return applied;
}

/**
 * The schema the URL's connections work in and the store's schema version there: 0 for none,
 * where no table is named like one of plantstore's either (an empty schema, or one of other
 * applications' tables alone). Anything else, a store or not, is refused rather than replaced.
 */
async function inspect(client: pg.Client): Promise<{ schema: string; version: number }> {
  const { rows } = await client.query<{ schema: string | null }>(
    'SELECT current_schema() AS schema',
  );
  const schema = rows[0]?.schema;
  if (schema == null) throw new BackupError('the connection has no schema to work in');
  const tables = await client.query<{ name: string }>(
    'SELECT tablename AS name FROM pg_tables WHERE schemaname = $1',
    [schema],
  );
  const present = new Set(tables.rows.map((row) => row.name));
  const where = `the schema ${schema}`;
  if (!present.has('schema_migrations')) {
    const ours = storeTables().filter((name) => present.has(name));
    if (ours.length > 0)
      throw new BackupError(
        `${where} holds tables named like plantstore's (${ours.join(', ')}) but no plantstore store`,
      );
    return { schema, version: 0 };
  }
  let migrated: { version: string; name: string }[];
  try {
    const read = await client.query<{ version: string; name: string }>(
      'SELECT version::text AS version, name::text AS name FROM schema_migrations',
    );
    migrated = read.rows;
  } catch {
    throw new BackupError(
      `${where} holds another tool's schema_migrations, not a plantstore store`,
    );
  }
  return { schema, version: Math.max(0, ...appliedMigrations(migrated, where)) };
}

async function connected<T>(
  url: string,
  work: (client: pg.Client) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'plantstore restore' });
  // A connection lost between queries: the query that needed it fails, and says so.
  client.on('error', () => undefined);
  // Stopped, the connection goes, and a query waiting on a lock with it.
  const stop = () => void client.end().catch(() => undefined);
  signal?.addEventListener('abort', stop, { once: true });
  try {
    await client.connect();
    return await work(client);
  } catch (error) {
    if (signal?.aborted) throw new BackupInterrupted('restore');
    if (error instanceof BackupError) throw error;
    throw new BackupError(`PostgreSQL: ${(error as Error).message}`);
  } finally {
    signal?.removeEventListener('abort', stop);
    await client.end().catch(() => undefined);
  }
}

/**
 * Writes the store's schema to `file` (which must not exist) with pg_dump, custom format,
 * readable by its owner only: a consistent snapshot while servers keep serving. The dump goes
 * to a private file beside it, which takes the name only once complete and synced.
 */
export async function backupPostgres(
  url: string,
  file: string,
  signal?: AbortSignal,
): Promise<BackupReport> {
  const tool = toolConnection(url);
  const { schema, version } = await connected(url, inspect);
  if (version === 0) throw new BackupError('the database holds no plantstore store to back up');
  const target = resolve(file);
  const taken = () => new BackupError(`${file} exists already: name a new file for the backup`);
  if (existsSync(target)) throw taken();
  const partial = join(dirname(target), `.${basename(target)}.${process.pid}.partial`);
  removeDeadCopies(target, (base) => new RegExp(`^\\.${base}\\.(\\d+)\\.partial$`));
  try {
    closeSync(openSync(partial, 'wx', 0o600));
    // A quoted pattern: the schema's name exactly, capitals and all.
    const pattern = `--schema=${quoteIdent(schema)}`;
    await dumpTo(partial, ['--format=custom', pattern, tool.url], tool.env, signal);
    if (signal?.aborted) throw new BackupInterrupted('backup');
    linkSync(partial, target);
    syncDirectoryOf(target);
  } catch (error) {
    if (error instanceof BackupError) throw error;
    // The name taken while pg_dump wrote (linkSync never replaces a file).
    if ((error as NodeJS.ErrnoException).code === 'EEXIST' && existsSync(target)) throw taken();
    throw new BackupError((error as Error).message);
  } finally {
    rmSync(partial, { force: true });
  }
  return { version };
}

/**
 * The migrations a backup lacks, from its schema_migrations rows, each checked against this
 * plantstore's: a table of another tool by that name, or a migration this plantstore does
 * not have (a newer one), is refused before anything is changed.
 */
async function missingMigrations(
  file: string,
  schema: string,
  signal?: AbortSignal,
): Promise<Migration[]> {
  const data = await runTool(
    'pg_restore',
    ['--data-only', `--schema=${schema}`, '--table=schema_migrations', '--file=-', file],
    process.env,
    signal,
    'restore',
  );
  const copy = /^COPY .+ \(version, name, applied_at\) FROM stdin;\n([\s\S]*?)^\\\.$/m.exec(data);
  if (copy === null)
    throw new BackupError(`${file} holds no plantstore store in the schema ${schema}`);
  const rows = copy[1]!
    .split('\n')
    .filter((row) => row !== '')
    .map((row) => {
      const [version = '', name = ''] = row.split('\t');
      return { version, name };
    });
  const applied = appliedMigrations(rows, file);
  const migrations = loadMigrations('postgres');
  return migrations.filter((m) => !applied.has(m.version));
}

/** The names of the objects of `kind` (TABLE, SEQUENCE, FUNCTION) plantstore's migrations create. */
function storeObjects(kind: string): string[] {
  const sql = loadMigrations('postgres')
    .map((migration) => migration.sql)
    .join('\n');
  const created = new RegExp(
    `CREATE (?:OR REPLACE )?(?:UNLOGGED )?${kind} (?:IF NOT EXISTS )?(\\w+)`,
    'gi',
  );
  return [...new Set([...sql.matchAll(created)].map((match) => match[1]!))];
}

const storeTables = () => [...storeObjects('TABLE'), 'schema_migrations'];

/** Drops plantstore's tables, sequences and functions where they exist: nothing else. */
function dropStore(): string {
  // No CASCADE: an object of the user's that depends on the store (a view, a foreign key)
  // stops the restore, named in its error, rather than going with it.
  return [
    `DROP TABLE IF EXISTS ${storeTables().join(', ')};`,
    `DROP SEQUENCE IF EXISTS ${storeObjects('SEQUENCE').join(', ')};`,
    `DROP FUNCTION IF EXISTS ${storeObjects('FUNCTION').join(', ')};`,
  ].join('\n');
}

/**
 * Replaces the store in the URL's schema with the backup `file` written by backupPostgres (or
 * `pg_dump --format=custom` of that schema), in one transaction: a failure anywhere, or the
 * command stopped, leaves the store as it was. Refuses while a server is connected to the
 * database. The backup is migrated in the same transaction, and the store's counters go on
 * from where the replaced store's reached, never back: the changes feed's positions one past
 * the highest it handed out (as restoreSqlite explains), and the plant id and version
 * sequences, so that no id or entity tag a client was given for a plant is given to another.
 */
export async function restorePostgres(
  url: string,
  file: string,
  signal?: AbortSignal,
): Promise<RestoreReport> {
  const tool = toolConnection(url);
  const path = resolve(file);
  const {
    schema,
    reached,
    version: replaced,
  } = await connected(
    url,
    async (client) => {
      const { schema, version } = await inspect(client);
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`,
        [SERVING_APPLICATION],
      );
      if (rows[0]!.n > 0) {
        throw new BackupError(
          `${rows[0]!.n} connections of a plantstore server are open on this database: ` +
            'stop the servers, then restore',
        );
      }
      // A database with no store yet has handed out nothing.
      const reached = version === 0 ? NOTHING_REACHED : await countersReached(client);
      return { schema, reached, version };
    },
    signal,
  );
  const missing = await missingMigrations(path, schema, signal);
  const feed = typeof reached.feed === 'bigint' && reached.feed > 0n ? reached.feed + 1n : 0n;
  const inSchema = `SET search_path = ${quoteIdent(schema)};\n`;
  // A lock the drops wait for longer than this (a session idle in a transaction on a table of
  // the store) fails the restore rather than hanging it.
  const prologue = `BEGIN;\nSET client_min_messages = warning;\nSET LOCAL lock_timeout = '10s';\n${inSchema}${keepTakenIds}${dropStore()}\n`;
  // The migration's own text may end in a comment: the next statement on a line of its own.
  const migrate = missing.map((m) => `${m.sql}\n;${recordMigration(m)};\n`).join('');
  const epilogue = `${inSchema}${migrate}${carry(feed, reached)}${takeKeptIds}COMMIT;\n`;
  await restoreThroughPsql(tool, path, schema, prologue, epilogue, signal);
  const version = loadMigrations('postgres').at(-1)!.version;
  // Before server-assigned ids, ids came from a counter of another shape, and no record said
  // which ones clients took: the restore does not work them out.
  const serverIds = loadMigrations('postgres').find((m) => m.name === 'server_ids')!.version;
  return {
    version,
    ...(typeof reached.feed === 'string' && { eventsNotCarried: reached.feed }),
    ...(typeof reached.feed !== 'string' && feed > 0n && { eventsAfter: feed }),
    ...(replaced > 0 &&
      replaced < serverIds && { idsNotCarried: 'its schema is older than server-assigned ids' }),
  };
}
