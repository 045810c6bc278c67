import { lstat, readlink, realpath } from 'node:fs/promises';
import { Command } from 'commander';
import {
  BackupError,
  type BackupReport,
  backupSqlite,
  restoreSqlite,
} from '../store/sqlite/backup.js';
import { databaseUrlOption, type DatabaseOptions, dbOption } from './options.js';

/** Exit code of a backup or restore refused for a reason the message gives. */
const FAILED = 1;

// On PostgreSQL the database's own tools do this better than a copy through plantstore could.
const POSTGRES_ADVICE =
  'backup and restore are for SQLite; on PostgreSQL use pg_dump and pg_restore (see docs/operating.md, Backups)';

async function run<R extends BackupReport>(
  options: DatabaseOptions,
  work: () => Promise<R>,
  done: (report: R) => string,
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

/**
 * The file a restore replaces. Through a symbolic link (a database kept on another volume)
 * that is the file the link leads to: the copy is then written beside it and renamed over
 * it, where renaming over the link would replace the link and leave the database as it was.
 * A link to nothing is refused, as `cp` does, rather than guess where to create a database.
 */
async function restoreTarget(db: string): Promise<string> {
  // A path that cannot be looked at (no file there yet, say) is the restore's to create or report.
  const link = await lstat(db).then(
    (stats) => stats.isSymbolicLink(),
    () => false,
  );
  if (!link) return db;
  try {
    return await realpath(db);
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    if (code !== 'ENOENT')
      throw new BackupError(`${db} is a symbolic link that cannot be followed: ${message}`);
    throw new BackupError(
      `${db} is a symbolic link to ${await readlink(db)}, which does not exist: ` +
        'restore onto the path where the database should be, or remove the link',
    );
  }
}

/** What the restore means for readers of the changes feed (see restoreSqlite). */
function feedNote(after: bigint | undefined, notCarried: string | undefined): string {
  if (notCarried !== undefined) {
    return (
      `\nplantstore: the replaced database could not be read (${notCarried}), so the changes ` +
      "feed's positions start again from the backup's: readers of GET /events must read the " +
      'plants again and follow the events from after=now'
    );
  }
  if (after === undefined) return '';
  return (
    `; the changes feed goes on after position ${after}: a reader resuming from before the ` +
    'restore is answered 410 and reads the plants again'
  );
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
        async () => {
          const target = await restoreTarget(options.db);
          return { ...(await restoreSqlite(file, target)), target };
        },
        ({ pages, version, target, eventsAfter, eventsNotCarried }) =>
          `restored ${options.db}${target === options.db ? '' : ` (a link to ${target})`} ` +
          `from ${file} (${pages} pages, schema version ${version})${feedNote(eventsAfter, eventsNotCarried)}`,
      ),
    );
  return [backup, restore];
}
