// What a SQLite restore carries over from the database it replaces (see restoreSqlite in
// backup.ts): how far its changes feed and plant ids went, and moving the copy past them.

import Database from 'better-sqlite3';
import { loadMigrations } from '../migrations.js';
import { migrateSqlite } from './migrate.js';
import { carryPlantIds } from './plant-ids.js';

/**
 * The last plant id the database handed out or skipped (0 for none), whether clients took ids
 * above it, and why these could not all be read, if they could not.
 */
export interface IdsReached {
  last: bigint;
  taken: boolean;
  unread?: string;
}

export const NO_IDS: IdsReached = { last: 0n, taken: false };

/**
 * How far the plant ids of the database `db` went (see IdsReached): the copy hands out none of
 * them, so that no id a client was given for a plant, or chose, goes to another plant. What
 * reads of a damaged database is carried all the same.
 */
export function idsReached(db: Database.Database): IdsReached {
  let last = 0n;
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    if (table.get('plant_id_counter') === undefined) {
      // Before server-assigned ids (0004), ids came from the plants table's AUTOINCREMENT and
      // no record says which ones clients took: the restore does not work them out.
      return table.get('plants') === undefined
        ? NO_IDS
        : { last, taken: false, unread: 'its schema is older than server-assigned ids' };
    }
    const counter = db.prepare('SELECT last FROM plant_id_counter').pluck().safeIntegers().get();
    last = typeof counter === 'bigint' ? counter : 0n;
    // Before 0007, every id clients took was a row of plant_ids_taken.
    const runs = table.get('plant_id_runs') !== undefined ? 'plant_id_runs' : 'plant_ids_taken';
    const taken = Number(db.prepare(`SELECT EXISTS (SELECT 1 FROM ${runs})`).pluck().get()) === 1;
    return { last, taken };
  } catch (error) {
    return { last, taken: false, unread: (error as Error).message };
  }
}

/**
 * The highest position the changes feed of the database `db` has handed out or moved its
 * horizon over (0 for none), or why it cannot be read. Three places record it, each on pages
 * of its own: the AUTOINCREMENT counter of the audit log (never below its highest entry), the
 * highest entry, the horizon. The highest of those that can be read is the answer; only when
 * none can (a damaged file) is it why.
 */
export function feedReached(db: Database.Database): bigint | string {
  const reads = [
    ['sqlite_sequence', "SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'"],
    ['audit_log', 'SELECT max(seq) FROM audit_log'],
    ['event_horizon', 'SELECT position FROM event_horizon'],
  ] as const;
  let reached: bigint | undefined;
  let failure: string | undefined;
  try {
    db.defaultSafeIntegers(true);
    const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    for (const [table, sql] of reads) {
      try {
        if (has.get(table) === undefined) continue;
        const value = db.prepare(sql).pluck().get();
        const at = typeof value === 'bigint' ? value : 0n;
        if (reached === undefined || at > reached) reached = at;
      } catch (error) {
        failure ??= (error as Error).message;
      }
    }
  } catch (error) {
    failure ??= (error as Error).message;
  }
  return reached ?? failure ?? 0n;
}

/**
 * Moves the copy's log on to `feed` (0: leaves it) and its plant ids past those the replaced
 * database `target` reached (see restoreSqlite). Answers the copy's schema version after, and
 * why the ids clients took in `target` could not be read, if they could not (a damaged page):
 * the rest is carried all the same.
 */
export function carryCounters(
  partial: string,
  feed: bigint,
  ids: IdsReached,
  target: string,
): { version: number; unread?: string } {
  const db = new Database(partial, { fileMustExist: true });
  try {
    const { version } = migrateSqlite(db, loadMigrations('sqlite'));
    const carry = (replaced: boolean) =>
      db.transaction(() => {
        if (feed > 0n) {
          const counted = db
            .prepare("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'audit_log'")
            .run(feed);
          if (counted.changes === 0) {
            db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('audit_log', ?)").run(feed);
          }
          db.prepare('UPDATE event_horizon SET position = max(position, ?)').run(feed);
        }
        carryPlantIds(db, ids.last, replaced ? 'replaced' : undefined);
      })();
    if (!ids.taken) {
      carry(false);
      return { version };
    }
    // Attached, the replaced file makes a -wal beside it, removed when it is detached: one
    // left by then is a server's, started meanwhile, and the restore stops (restoreSqlite).
    db.prepare('ATTACH DATABASE ? AS replaced').run(target);
    let unread: string | undefined;
    try {
      carry(true);
    } catch (error) {
      unread = (error as Error).message;
    }
    db.exec('DETACH DATABASE replaced');
    if (unread === undefined) return { version };
    carry(false);
    return { version, unread };
  } finally {
    db.close();
  }
}
