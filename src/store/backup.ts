// What the backup and restore commands of both databases report, and refuse with.

/** A backup or restore that cannot go ahead; its message says why, in the user's words. */
export class BackupError extends Error {}

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
