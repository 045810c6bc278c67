// Backing up and restoring a SQLite database while, or instead of, a server using it.

import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import {
  BackupError,
  BackupInterrupted,
  type BackupReport,
  type RestoreReport,
  removeDeadCopies,
  syncDirectoryOf,
} from '../backup.js';
import { loadMigrations } from '../migrations.js';
import { isSqliteError } from './query.js';
import {
  carryCounters,
  feedReached,
  type IdsReached,
  idsReached,
  NO_IDS,
} from './restore-carry.js';
import { createPrivately } from './private-files.js';

// SQLite's backup API restarts a copy made in steps whenever another connection writes, so
// under a busy server a stepped copy might never end: copy every page in one step, inside
// one read transaction, which in WAL mode holds up no writer.
const ALL_PAGES = 0x7fffffff;

/**
 * Copies the database at `source` to a new file `destination` with SQLite's online backup
 * API: a consistent snapshot even while a server writes, holding up none of its writes. The
 * copy is checked before it takes the destination's name, and is readable by its owner only.
 */
export async function backupSqlite(
  source: string,
  destination: string,
  signal?: AbortSignal,
): Promise<BackupReport> {
  mustExist(source);
  if (existsSync(destination)) {
    throw new BackupError(`${destination} exists already: name a new file for the backup`);
  }
  let version = 0;
  const copy = { readonly: false, signal, command: 'backup' } as const;
  const pages = await copyThenPublish(source, destination, copy, (partial) => {
    selfContained(partial);
    version = check(partial, 'quick_check');
  });
  return { pages, version };
}

/**
 * Replaces the database at `target` (or creates it) with the backup `from`, after a full
 * integrity check of the backup. Refuses while any process has `target` open, a server
 * above all: overwriting a database under a running server would corrupt it.
 *
 * The changes feed's positions go on from where the replaced database's reached, never back:
 * the backup's log ends at an older position, and its next events would take positions
 * that readers of the replaced database already hold for other events, so a reader resuming
 * after one would skip, unseen, the changes up to it, the restore itself among them. So the
 * copy's AUTOINCREMENT counter of the audit log and the feed's horizon are moved one past that
 * position (the copy migrated first, for a backup older than the feed): every cursor handed
 * out before the restore, the newest too, is then below the horizon, a 410 that tells its
 * reader to read the plants again. A replaced database whose positions cannot be read (a
 * damaged one, the usual reason to restore) is restored over all the same, and the report
 * says its positions were not carried. The plant id counter goes on likewise (idsReached).
 */
export async function restoreSqlite(
  from: string,
  target: string,
  signal?: AbortSignal,
): Promise<RestoreReport> {
  mustExist(from);
  let version = check(from, 'integrity_check');
  let reached: { feed: bigint | string; ids: IdsReached } = { feed: 0n, ids: NO_IDS };
  if (existsSync(target)) {
    reached = releaseUnused(target, (db) => ({ feed: feedReached(db), ids: idsReached(db) }));
  }
  const { ids } = reached;
  let idsUnread = ids.unread;
  const feed = typeof reached.feed === 'bigint' && reached.feed > 0n ? reached.feed + 1n : 0n;
  const copy = { readonly: true, signal, command: 'restore' } as const;
  const pages = await copyThenPublish(from, target, copy, (partial) => {
    if (feed > 0n || ids.last > 0n || ids.taken) {
      const carried = carryCounters(partial, feed, ids, target);
      version = carried.version;
      idsUnread = carried.unread ?? ids.unread;
    }
    // The old database's WAL must not outlive it: SQLite would replay it into the new file.
    // Looked at last, just before the copy takes the name: a server started on the target
    // meanwhile has made one.
    if (existsSync(`${target}-wal`)) throw inUse(target);
  });
  return {
    pages,
    version,
    ...(typeof reached.feed === 'string' && { eventsNotCarried: reached.feed }),
    ...(typeof reached.feed !== 'string' && feed > 0n && { eventsAfter: feed }),
    ...(idsUnread !== undefined && { idsNotCarried: idsUnread }),
  };
}

/**
 * Copies `source` into a private file beside `name` with the backup API, runs `vet` on the
 * copy, and only then gives it `name`; a copy that fails on the way, or whose `signal` came
 * (Ctrl-C) before it took the name, is removed.
 */
async function copyThenPublish(
  source: string,
  name: string,
  copy: { readonly: boolean; signal: AbortSignal | undefined; command: 'backup' | 'restore' },
  vet: (partial: string) => void,
): Promise<number> {
  const partial = `${name}.partial-${process.pid}`;
  removeDeadCopies(name, (base) => new RegExp(`^${base}\\.partial-(\\d+)$`));
  const { readonly, signal, command } = copy;
  // Each step of the copy holds the thread: a signal that came meanwhile is delivered once
  // the event loop polls again, so let it (setImmediate runs after the poll).
  const interrupted = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    if (signal?.aborted) throw new BackupInterrupted(command);
  };
  createPrivately(partial);
  const db = new Database(source, { readonly, fileMustExist: true });
  try {
    const { totalPages } = await db.backup(partial, { progress: () => ALL_PAGES });
    await interrupted();
    vet(partial);
    await interrupted();
    publish(partial, name);
    return totalPages;
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  } finally {
    db.close();
  }
}

/**
 * A backup in rollback-journal mode is one file that opens, read-only too, with no `-wal`
 * or `-shm` beside it; a server switches it back to WAL when it opens it.
 */
function selfContained(file: string): void {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } finally {
    db.close();
  }
}

function mustExist(file: string): void {
  if (!existsSync(file)) throw new BackupError(`no database at ${file}`);
}

/** Runs an SQLite check on a plantstore database file; its schema version if it passes. */
function check(file: string, pragma: 'quick_check' | 'integrity_check'): number {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new BackupError(`${file} cannot be opened: ${(error as Error).message}`);
  }
  try {
    const result = db.pragma(pragma, { simple: true });
    if (result !== 'ok') throw new BackupError(`${file} failed SQLite's ${pragma}: ${result}`);
    const version = db.prepare('SELECT max(version) FROM schema_migrations').pluck().get();
    if (typeof version !== 'number') throw new Error('no schema version');
    const known = loadMigrations('sqlite').at(-1)?.version ?? 0;
    if (version > known) {
      throw new BackupError(
        `${file} has schema version ${version}, newer than this plantstore's ${known}: use a newer plantstore`,
      );
    }
    return version;
  } catch (error) {
    if (error instanceof BackupError) throw error;
    throw new BackupError(`${file} is not a plantstore database: ${(error as Error).message}`);
  } finally {
    db.close();
  }
}

/**
 * Proves that no process has the database open, by taking an exclusive lock with no wait:
 * any other connection in WAL mode, even an idle one, keeps a shared lock on the file.
 * Then answers what `read` reads of it, in the same connection: another one, read-only
 * even, would leave a WAL behind. Closing the connection checkpoints the WAL into the file
 * and removes it.
 */
function releaseUnused<T>(target: string, read: (db: Database.Database) => T): T {
  const db = new Database(target, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return read(db);
  } catch (error) {
    if (isSqliteError(error, 'SQLITE_BUSY')) throw inUse(target);
    throw error;
  } finally {
    db.close();
  }
}

const inUse = (target: string) =>
  new BackupError(`${target} is in use (is a server running on it?): stop it, then restore`);

/** Gives the finished copy its name, durably: the file's data, then the directory entry. */
function publish(partial: string, name: string): void {
  const fd = openSync(partial, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(partial, name);
  syncDirectoryOf(name);
}
