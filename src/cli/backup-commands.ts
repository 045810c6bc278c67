import { Command } from 'commander';
import { BackupError, backupSqlite, restoreSqlite } from '../store/sqlite/backup.js';
import { databaseUrlOption, type DatabaseOptions, dbOption } from './options.js';

/** Exit code of a backup or restore refused for a reason the message gives. */
const FAILED = 1;

// On PostgreSQL the database's own tools do this better than a copy through plantstore could.
const POSTGRES_ADVICE =
  'backup and restore are for SQLite; on PostgreSQL use pg_dump and pg_restore (see the README)';

async function run(
  options: DatabaseOptions,
  work: () => Promise<{ pages: number; version: number }>,
  done: (report: { pages: number; version: number }) => string,
): Promise<void> {
  if (options.databaseUrl !== undefined) {
    process.stderr.write(`plantstore: ${POSTGRES_ADVICE}\n`);
    process.exitCode = FAILED;
    return;
  }
  try {
    process.stderr.write(`${done(await work())}\n`);
  } catch (error) {
    if (!(error instanceof BackupError)) throw error;
    process.stderr.write(`plantstore: ${error.message}\n`);
    process.exitCode = FAILED;
  }
}

export function backupCommands(): Command[] {
  const backup = new Command('backup')
    .description(
      'copy the SQLite database to a new FILE, consistently, while a server keeps serving',
    )
    .argument('<file>', 'the backup to write; must not exist yet')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action((file: string, options: DatabaseOptions) =>
      run(
        options,
        () => backupSqlite(options.db, file),
        ({ pages, version }) =>
          `backed up ${options.db} to ${file} (${pages} pages, schema version ${version})`,
      ),
    );
  const restore = new Command('restore')
    .description(
      'replace the SQLite database with a backup FILE, after checking its integrity; ' +
        'refuses while a server (or any process) has the database open',
    )
    .argument('<file>', 'a backup written by plantstore backup')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action((file: string, options: DatabaseOptions) =>
      run(
        options,
        () => restoreSqlite(file, options.db),
        ({ pages, version }) =>
          `restored ${options.db} from ${file} (${pages} pages, schema version ${version})`,
      ),
    );
  return [backup, restore];
}
