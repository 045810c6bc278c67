import type Database from 'better-sqlite3';
import type { AuditQuery } from '../../core/audit.js';
import { INT64_MIN } from '../../core/int64.js';
import { AUDIT_COLUMNS, type AuditRow, toAuditEntry } from '../rows.js';
import type { AuditStore } from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';

export function sqliteAudit(db: Database.Database, batches: GroupCommit): AuditStore {
  const write = batchedWrites(batches);
  const prune = db.prepare(
    `DELETE FROM audit_log WHERE seq IN (
       SELECT seq FROM audit_log WHERE at < ? ORDER BY at LIMIT ?)`,
  );
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
    prune: (before: Date, batch: number) => write(() => prune.run(before.getTime(), batch).changes),
  };
}
