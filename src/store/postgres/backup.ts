// Backing up and restoring a PostgreSQL store with PostgreSQL's own tools: pg_dump writes the
// backup, pg_restore reads it and psql applies it, in one transaction that also carries the
// changes feed's positions on, as `restore` does on SQLite (sqlite/backup.ts).

import { spawn } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import pg from 'pg';
import type { Log } from '../../core/log.js';
import { BackupError, type BackupReport, type RestoreReport } from '../backup.js';
import { assertNotNewer, loadMigrations } from '../migrations.js';
import { migratePostgres } from './migrate.js';

/** The application_name of a serving store's connections (open.ts). */
const SERVING = 'plantstore';

/**
 * The URL for a tool's command line, and its environment: the password goes in PGPASSWORD,
 * not in the arguments, which every user of the machine can read (ps).
 */
function toolConnection(url: string): { url: string; env: NodeJS.ProcessEnv } {
  const parsed = new URL(url);
  if (parsed.password === '') return { url, env: process.env };
  const password = decodeURIComponent(parsed.password);
  parsed.password = '';
  return { url: parsed.toString(), env: { ...process.env, PGPASSWORD: password } };
}

/** Runs `command` to its end; answers its standard output, or throws with its standard error. */
function runTool(command: string, args: string[], env = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', (error) => reject(toolMissing(command, error)));
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else reject(toolFailed(command, code, Buffer.concat(err).toString('utf8')));
    });
  });
}

function toolMissing(command: string, error: NodeJS.ErrnoException): BackupError {
  return new BackupError(
    error.code === 'ENOENT'
      ? `${command} was not found: install PostgreSQL's client tools (Debian: postgresql-client)`
      : `${command} could not start: ${error.message}`,
  );
}

function toolFailed(command: string, code: number | null, stderr: string): BackupError {
  const said = stderr.trim().split('\n').slice(-3).join(' ');
  return new BackupError(`${command} failed (exit ${code ?? 'by a signal'}): ${said}`);
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The schema the URL's connections work in, and the store's schema version there (0: none). */
async function inspect(client: pg.Client): Promise<{ schema: string; version: number }> {
  const { rows } = await client.query<{ schema: string | null; migrated: boolean }>(
    "SELECT current_schema() AS schema, to_regclass('schema_migrations') IS NOT NULL AS migrated",
  );
  const schema = rows[0]?.schema;
  if (schema == null) throw new BackupError('the connection has no schema to work in');
  if (!rows[0]!.migrated) return { schema, version: 0 };
  const version = await client.query<{ v: number }>(
    'SELECT coalesce(max(version), 0)::int AS v FROM schema_migrations',
  );
  return { schema, version: version.rows[0]!.v };
}

async function connected<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'plantstore restore' });
  // A connection lost between queries: the query that needed it fails, and says so.
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await work(client);
  } catch (error) {
    if (error instanceof BackupError) throw error;
    throw new BackupError(`PostgreSQL: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Writes the store's schema to `file` (which must not exist) with pg_dump, custom format,
 * readable by its owner only: a consistent snapshot while servers keep serving.
 */
export async function backupPostgres(url: string, file: string): Promise<BackupReport> {
  const { schema, version } = await connected(url, inspect);
  if (version === 0) throw new BackupError('the database holds no plantstore store to back up');
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    throw new BackupError(
      code === 'EEXIST' ? `${file} exists already: name a new file for the backup` : message,
    );
  }
  try {
    const tool = toolConnection(url);
    await runTool(
      'pg_dump',
      ['--format=custom', `--schema=${schema}`, `--file=${file}`, tool.url],
      tool.env,
    );
  } catch (error) {
    rmSync(file, { force: true });
    throw error;
  }
  return { version };
}

/** The schema version a backup holds, read from its schema_migrations rows. */
async function backupVersion(file: string, schema: string): Promise<number> {
  const data = await runTool('pg_restore', [
    '--data-only',
    `--schema=${schema}`,
    '--table=schema_migrations',
    '--file=-',
    file,
  ]);
  const versions = [...data.matchAll(/^(\d+)\t/gm)].map((match) => Number(match[1]));
  if (versions.length === 0)
    throw new BackupError(`${file} holds no plantstore store in the schema ${schema}`);
  return Math.max(...versions);
}

/**
 * The highest position the changes feed of the store has handed out or moved its horizon over
 * (0 for none), or why it cannot be read: the audit log's sequence, its highest entry, the
 * horizon, the highest of those that read (as feedReached in sqlite/backup.ts).
 */
async function feedReached(client: pg.Client): Promise<bigint | string> {
  const reads = [
    "SELECT pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'seq')::regclass) AS p",
    'SELECT max(seq) AS p FROM audit_log',
    'SELECT position AS p FROM event_horizon',
  ];
  let reached: bigint | undefined;
  let failure: string | undefined;
  for (const sql of reads) {
    try {
      const { rows } = await client.query<{ p: string | null }>(sql);
      const p = BigInt(rows[0]?.p ?? 0);
      if (reached === undefined || p > reached) reached = p;
    } catch (error) {
      failure ??= (error as Error).message;
    }
  }
  return reached ?? failure ?? 'nothing read';
}

/** Moves the restored log's sequence and horizon to `to`, where they are lower; any version. */
const carry = (to: bigint) => `DO $carry$ BEGIN
  IF to_regclass('audit_log') IS NOT NULL THEN
    PERFORM setval(pg_get_serial_sequence('audit_log', 'seq'), greatest(${to},
      coalesce(pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'seq')::regclass), 0),
      (SELECT coalesce(max(seq), 0) FROM audit_log)));
  END IF;
  IF to_regclass('event_horizon') IS NOT NULL THEN
    UPDATE event_horizon SET position = greatest(position, ${to});
  END IF;
END $carry$;
`;

/** The tables, sequences and functions plantstore's migrations create: what a restore replaces. */
function storeObjects(): string[] {
  const sql = loadMigrations('postgres')
    .map((migration) => migration.sql)
    .join('\n');
  const named = (kind: string) =>
    [
      ...sql.matchAll(
        new RegExp(`CREATE (?:OR REPLACE )?(?:UNLOGGED )?${kind} (?:IF NOT EXISTS )?(\\w+)`, 'gi'),
      ),
    ]
      .map((match) => match[1]!)
      .filter((name, i, all) => all.indexOf(name) === i);
  return [
    ...[...named('TABLE'), 'schema_migrations'].map((t) => `DROP TABLE IF EXISTS ${t} CASCADE;`),
    ...named('SEQUENCE').map((s) => `DROP SEQUENCE IF EXISTS ${s} CASCADE;`),
    ...named('FUNCTION').map((f) => `DROP FUNCTION IF EXISTS ${f} CASCADE;`),
  ];
}

/**
 * Applies the backup's schema `schema` through psql in one transaction: plantstore's objects
 * dropped, the backup's put in their place, the positions carried to `to`. A pg_restore that
 * fails part-way ends psql's input without the COMMIT, so nothing of it stays.
 */
function apply(url: string, file: string, schema: string, to: bigint): Promise<void> {
  const inSchema = `SET search_path = ${quoteIdent(schema)};\n`;
  const prologue = `BEGIN;\nSET client_min_messages = warning;\n${inSchema}${storeObjects().join('\n')}\n`;
  const epilogue = `${inSchema}${to > 0n ? carry(to) : ''}COMMIT;\n`;
  return new Promise((resolve, reject) => {
    const tool = toolConnection(url);
    const psql = spawn('psql', ['--no-psqlrc', '--quiet', '-v', 'ON_ERROR_STOP=1', tool.url], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: tool.env,
    });
    const reader = spawn('pg_restore', [`--schema=${schema}`, '--no-owner', '--file=-', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const errors = { psql: '', pg_restore: '' };
    psql.stderr.on('data', (chunk: Buffer) => (errors.psql += chunk.toString('utf8')));
    reader.stderr.on('data', (chunk: Buffer) => (errors.pg_restore += chunk.toString('utf8')));
    // psql stopped on an error closes its input: pg_restore's writes then fail, which its exit says.
    psql.stdin.on('error', () => undefined);
    let failure: BackupError | undefined;
    psql.on('error', (error) => (failure ??= toolMissing('psql', error)));
    reader.on('error', (error) => (failure ??= toolMissing('pg_restore', error)));
    psql.stdin.write(prologue);
    reader.stdout.pipe(psql.stdin, { end: false });
    reader.on('close', (code) => {
      if (code !== 0) failure ??= toolFailed('pg_restore', code, errors.pg_restore);
      psql.stdin.end(failure === undefined ? epilogue : '');
    });
    psql.on('close', (code) => {
      if (code !== 0) failure = toolFailed('psql', code, errors.psql);
      if (failure === undefined) resolve();
      else reject(failure);
    });
  });
}

/**
 * Replaces the store in the URL's schema with the backup `file` written by backupPostgres (or
 * `pg_dump --format=custom` of that schema), in one transaction. Refuses while a server is
 * connected to the database. The changes feed goes on after every position the replaced store
 * handed out, as restoreSqlite explains: its sequence and horizon are moved one past it, and a
 * backup older than the feed is migrated first.
 */
export async function restorePostgres(url: string, file: string, log: Log): Promise<RestoreReport> {
  const { schema, reached } = await connected(url, async (client) => {
    const { schema, version } = await inspect(client);
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`,
      [SERVING],
    );
    if (rows[0]!.n > 0) {
      throw new BackupError(
        `${rows[0]!.n} connections of a plantstore server are open on this database: ` +
          'stop the servers, then restore',
      );
    }
    // A database with no store yet has handed out no position.
    return { schema, reached: version === 0 ? 0n : await feedReached(client) };
  });
  const migrations = loadMigrations('postgres');
  try {
    assertNotNewer(await backupVersion(file, schema), migrations);
  } catch (error) {
    if (error instanceof BackupError) throw error;
    throw new BackupError(`${file}: ${(error as Error).message}`);
  }
  const to = typeof reached === 'bigint' && reached > 0n ? reached + 1n : 0n;
  await apply(url, file, schema, to);
  const { version } = await migratePostgres(url, migrations, log);
  if (to > 0n) await connected(url, (client) => client.query(carry(to)));
  if (typeof reached === 'string') return { version, eventsNotCarried: reached };
  return { version, ...(to > 0n && { eventsAfter: to }) };
}
