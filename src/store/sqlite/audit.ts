import type Database from 'better-sqlite3';
import type { AuditQuery } from '../../core/audit.js';
import { INT64_MIN } from '../../core/int64.js';
import { AUDIT_COLUMNS, type AuditRow, toAuditEntry } from '../rows.js';
import type { AuditStore } from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';

export function sqliteAudit(db: Database.Database, batches: GroupCommit): AuditStore {
  const write = batchedWrites(batches);
  const prune = db
    .prepare(
      `DELETE FROM audit_log WHERE seq IN (
         SELECT seq FROM audit_log WHERE at < ? ORDER BY at LIMIT ?) RETURNING seq`,
    )
    .pluck();
  // The changes feed reads the trail: what is deleted from it is gone from the feed too, so
  // the feed's horizon moves up to the highest seq deleted (see 0010_changes_feed.sql).
  const moveHorizon = db.prepare('UPDATE event_horizon SET position = max(position, ?)');
  return {
    async list({ since, plantId, afterSeq, limit }: AuditQuery) {
      // Built per call: this serves the audit command, not requests, and a statement per
      // filter combination lets SQLite use the index that fits.
      const where = ['seq > @afterSeq'];
      if (since !== undefined) where.push('at >= @since');
      if (plantId !== undefined) where.push('plant_id = @plantId');
      const statement = db.prepare(
        `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')}
         ORDER BY seq LIMIT @limit`,
      );
      const rows = guard(() =>
        statement.all({
          afterSeq: afterSeq ?? INT64_MIN,
          since: since?.getTime() ?? null,
          plantId: plantId ?? null,
          limit,
        }),
      ) as (AuditRow & { at: bigint })[];
      return rows.map((row) => toAuditEntry(row, new Date(Number(row.at))));
    },
    prune: (before: Date, batch: number) =>
      write(() => {
        const deleted = prune.all(before.getTime(), batch) as bigint[];
        if (deleted.length > 0) {
          moveHorizon.run(deleted.reduce((highest, seq) => (seq > highest ? seq : highest)));
        }
        return deleted.length;
      }),
  };
}
