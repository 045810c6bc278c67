// Backing up and restoring a SQLite database while, or instead of, a server using it.

import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { loadMigrations } from '../migrations.js';
import { isSqliteError } from './query.js';
import { createPrivately } from './private-files.js';

/** A backup or restore that cannot go ahead; its message says why, in the user's words. */
export class BackupError extends Error {}

export interface BackupReport {
  /** Database pages copied. */
  pages: number;
  /** Schema version of the copy. */
  version: number;
}

// SQLite's backup API restarts a copy made in steps whenever another connection writes, so
// under a busy server a stepped copy might never end: copy every page in one step, inside
// one read transaction, which in WAL mode holds up no writer.
const ALL_PAGES = 0x7fffffff;

/**
 * Copies the database at `source` to a new file `destination` with SQLite's online backup
 * API: a consistent snapshot even while a server writes, holding up none of its writes. The
 * copy is checked before it takes the destination's name, and is readable by its owner only.
 */
export async function backupSqlite(source: string, destination: string): Promise<BackupReport> {
  mustExist(source);
  if (existsSync(destination)) {
    throw new BackupError(`${destination} exists already: name a new file for the backup`);
  }
  const partial = `${destination}.partial-${process.pid}`;
  createPrivately(partial);
  const db = new Database(source, { fileMustExist: true });
  try {
    const { totalPages } = await db.backup(partial, { progress: () => ALL_PAGES });
    selfContained(partial);
    const version = check(partial, 'quick_check');
    publish(partial, destination);
    return { pages: totalPages, version };
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  } finally {
    db.close();
  }
}

/**
 * Replaces the database at `target` (or creates it) with the backup `from`, after a full
 * integrity check of the backup. Refuses while any process has `target` open, a server
 * above all: overwriting a database under a running server would corrupt it.
 */
export async function restoreSqlite(from: string, target: string): Promise<BackupReport> {
  mustExist(from);
  const version = check(from, 'integrity_check');
  if (existsSync(target)) releaseUnused(target);
  const partial = `${target}.partial-${process.pid}`;
  createPrivately(partial);
  const db = new Database(from, { readonly: true, fileMustExist: true });
  try {
    const { totalPages } = await db.backup(partial, { progress: () => ALL_PAGES });
    // The old database's WAL must not outlive it: SQLite would replay it into the new file.
    if (existsSync(`${target}-wal`)) throw inUse(target);
    publish(partial, target);
    return { pages: totalPages, version };
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
 * Closing the connection checkpoints the WAL into the file and removes it.
 */
function releaseUnused(target: string): void {
  const db = new Database(target, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
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
  const dir = openSync(dirname(name), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
