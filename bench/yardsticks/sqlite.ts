/**
 * The SQLite side of the SQLite yardsticks: WAL, synchronous=NORMAL (an answered write
 * survives the process, not a power cut: what plantstore's `--durability process` promises),
 * the file read through a memory map as plantstore reads it (so that a ratio is what its
 * features cost, not a setting the yardstick lacks),
 * one autocommit transaction per request, prepared statements, and the usable tokens read
 * once at start.
 */
import Database from 'better-sqlite3';
import type { ListQuery, PlantRow, TokenGrant } from './common.js';

export function openSqlite(file: string) {
  const db = new Database(file, { fileMustExist: true });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 200');
  db.pragma('mmap_size = 2147483648');
  db.defaultSafeIntegers(true);
  const statements = {
    getOne: db.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?'),
    remove: db.prepare<[bigint]>('DELETE FROM plants WHERE id = ?'),
    insert: db.prepare<[string, string | null], PlantRow>(
      'INSERT INTO plants (name, tag) VALUES (?, ?) RETURNING id, name, tag',
    ),
    pageAll: db.prepare<[number], PlantRow>('SELECT id, name, tag FROM plants ORDER BY id LIMIT ?'),
    pageAfter: db.prepare<[bigint, number], PlantRow>(
      'SELECT id, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?',
    ),
    // The tag filter reads plantstore's index plants_by_tag (tag, id), as plantstore does.
    pageTag: db.prepare<[string, number], PlantRow>(
      'SELECT id, name, tag FROM plants WHERE tag = ? ORDER BY id LIMIT ?',
    ),
    pageTagAfter: db.prepare<[string, bigint, number], PlantRow>(
      'SELECT id, name, tag FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
    ),
  };
  /** One page of the list and one row more, which tells whether another page follows. */
  const page = ({ limit, after, tag }: ListQuery): PlantRow[] => {
    if (tag !== undefined) {
      return after === undefined
        ? statements.pageTag.all(tag, limit + 1)
        : statements.pageTagAfter.all(tag, after, limit + 1);
    }
    return after === undefined
      ? statements.pageAll.all(limit + 1)
      : statements.pageAfter.all(after, limit + 1);
  };
  /**
   * Creates a plant and returns it. `.all()`, not `.get()`: `.get()` resets the statement after
   * its first row, before SQLite reports it done, and a commit finished by a reset runs no WAL
   * hook: the automatic checkpoint never ran, the WAL grew by about 200 MB a second under
   * load, and the yardstick was spared the checkpoints' copying and syncing that any SQLite
   * application pays (bench/HISTORY.md).
   */
  const create = (name: string, tag: string | null): PlantRow =>
    statements.insert.all(name, tag)[0]!;
  const grants = db
    .prepare<[bigint], TokenGrant>(
      `SELECT hash, scopes FROM tokens
       WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
    )
    .all(BigInt(Date.now()));
  return { db, statements, page, create, grants };
}
