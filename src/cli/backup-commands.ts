import { lstat, readlink, realpath } from 'node:fs/promises';
import { Command } from 'commander';
import {
  BackupError,
  BackupInterrupted,
  type BackupReport,
  type RestoreReport,
} from '../store/backup.js';
import { backupSqlite, restoreSqlite } from '../store/sqlite/backup.js';
import { databaseUrlOption, type DatabaseOptions, dbOption } from './options.js';

/** Exit code of a backup or restore refused for a reason the message gives. */
const FAILED = 1;
/** As a shell reports a command ended by Ctrl-C (128 + SIGINT). */
const INTERRUPTED = 130;

/**
 * Runs a backup or restore: its report, or its refusal, on stderr. Ctrl-C, SIGTERM or SIGHUP stops
 * it, as the store's functions stop (no half-written file left behind, nothing replaced); a
 * second one, with no handler left, ends the process at once.
 */
async function run<R extends BackupReport>(
  work: (signal: AbortSignal) => Promise<R>,
  done: (report: R) => string,
): Promise<void> {
  const interrupt = new AbortController();
  const stop = () => interrupt.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.once('SIGHUP', stop);
  try {
    process.stderr.write(`${done(await work(interrupt.signal))}\n`);
  } catch (error) {
    if (!(error instanceof BackupError)) throw error;
    process.stderr.write(`plantstore: ${error.message}\n`);
    process.exitCode = error instanceof BackupInterrupted ? INTERRUPTED : FAILED;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    process.off('SIGHUP', stop);
  }
}

// PostgreSQL's module (and pg) only for the commands that use it, as store/open.ts does.
const postgres = () => import('../store/postgres/backup.js');

/** "(N pages, schema version V)", the pages on SQLite only. */
const copied = ({ pages, version }: BackupReport) =>
  `(${pages === undefined ? '' : `${pages} pages, `}schema version ${version})`;

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

function idsNote(notCarried: string | undefined): string {
  if (notCarried === undefined) return '';
  return (
    `\nplantstore: the replaced database's plant ids could not be read (${notCarried}), so ` +
    'ids it handed out or saw clients choose after the backup may be given to new plants'
  );
}

export function backupCommands(): Command[] {
  const backup = new Command('backup')
    .description(
      'copy the database to a new FILE, consistently, while a server keeps serving ' +
        '(on PostgreSQL with pg_dump)',
    )
    .argument('<file>', 'the backup to write; must not exist yet')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action((file: string, { db, databaseUrl }: DatabaseOptions) =>
      run(
        async (signal) =>
          databaseUrl === undefined
            ? backupSqlite(db, file, signal)
            : (await postgres()).backupPostgres(databaseUrl, file, signal),
        (report) =>
          `backed up ${databaseUrl === undefined ? db : 'the PostgreSQL store'} to ${file} ${copied(report)}`,
      ),
    );
  const restore = new Command('restore')
    .description(
      'replace the database with a backup FILE, after checking it; refuses while a server ' +
        'has the database open (on PostgreSQL with pg_restore and psql, in one transaction)',
    )
    .argument('<file>', 'a backup written by plantstore backup')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action((file: string, { db, databaseUrl }: DatabaseOptions) =>
      run(
        async (signal): Promise<RestoreReport & { target: string }> => {
          if (databaseUrl !== undefined) {
            const report = await (await postgres()).restorePostgres(databaseUrl, file, signal);
            return { ...report, target: 'the PostgreSQL store' };
          }
          const target = await restoreTarget(db);
          return { ...(await restoreSqlite(file, target, signal)), target };
        },
        (report) => {
          const { target, eventsAfter, eventsNotCarried, idsNotCarried } = report;
          const name =
            databaseUrl !== undefined || target === db ? target : `${db} (a link to ${target})`;
          return `restored ${name} from ${file} ${copied(report)}${feedNote(eventsAfter, eventsNotCarried)}${idsNote(idsNotCarried)}`;
        },
      ),
    );
  return [backup, restore];
}
