// What the backup and restore commands of both databases report, and refuse with.

import { closeSync, fsyncSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

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
