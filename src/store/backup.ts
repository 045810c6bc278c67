// What the backup and restore commands of both databases report, and refuse with.

import { closeSync, fsyncSync, openSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** A backup or restore that cannot go ahead; its message says why, in the user's words. */
export class BackupError extends Error {}

/** A backup or restore stopped by a signal (Ctrl-C), before it changed anything. */
export class BackupInterrupted extends BackupError {
  constructor(command: 'backup' | 'restore') {
    super(
      command === 'backup'
        ? 'interrupted: no backup was written'
        : 'interrupted: the store was not replaced, it is as it was',
    );
  }
}

export interface BackupReport {
  /** Database pages copied (SQLite). */
  pages?: number;
  /** Schema version of the copy. */
  version: number;
}

/** What a restore did to the changes feed's positions (see restoreSqlite, restorePostgres). */
export interface RestoreReport extends BackupReport {
  /** The position the restored log goes on after: every older cursor is answered 410. */
  eventsAfter?: bigint;
  /** Why the replaced database's positions could not be carried over, if they could not. */
  eventsNotCarried?: string;
  /**
   * Why the plant ids the replaced database handed out or saw clients take could not be read,
   * if they could not: the restored store may give one of them to a new plant.
   */
  idsNotCarried?: string;
}

/** Makes the entry of `name` in its directory durable (after a rename or a link to it). */
export function syncDirectoryOf(name: string): void {
  const dir = openSync(dirname(name), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Removes the private copies a backup or restore of `name` left when it was killed outright
 * (SIGKILL, a power cut: nothing could remove them then), each named by `pattern` with the
 * process id it belonged to as its first group. A copy whose process still runs (another
 * backup of the same file, right now) is left alone.
 */
export function removeDeadCopies(name: string, pattern: (base: string) => RegExp): void {
  const dir = dirname(name);
  const named = pattern(basename(name).replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    // No such directory (or none to read): the command's own write says so.
    return;
  }
  for (const entry of entries) {
    const pid = Number(named.exec(entry)?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || running(pid)) continue;
    rmSync(join(dir, entry), { force: true });
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
