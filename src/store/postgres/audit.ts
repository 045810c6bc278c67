import type { AuditQuery } from '../../core/audit.js';
import { INT64_MIN } from '../../core/int64.js';
import { AUDIT_COLUMNS, type AuditRow, toAuditEntry } from '../rows.js';
import type { AuditStore } from '../store.js';
import type { Query } from './query.js';

export function postgresAudit(query: Query): AuditStore {
  return {
    async list({ since, plantId, afterSeq, limit }: AuditQuery) {
      const values: unknown[] = [(afterSeq ?? INT64_MIN).toString(), limit];
      const where = ['seq > $1'];
      if (since !== undefined) where.push(`at >= $${values.push(since)}`);
      if (plantId !== undefined) where.push(`plant_id = $${values.push(plantId.toString())}`);
      const { rows } = await query<AuditRow & { at: Date }>(
        `audit.list.${since !== undefined}.${plantId !== undefined}`,
        `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')}
         ORDER BY seq LIMIT $2`,
        values,
      );
      return rows.map((row) => toAuditEntry(row, row.at));
    },
    async prune(before: Date, batch: number) {
      const { rows } = await query<{ deleted: bigint }>(
        'audit.prune',
        // = ANY(ARRAY(...)), not IN (...): with IN the planner joins the batch to a scan of
        // the whole trail. Planned each time: prepared, it would keep the plan made for the
        // trail its first rounds saw, small enough to read whole (see query.ts). The changes
        // feed reads the trail: what is deleted is gone from the feed too, so the feed's
        // horizon moves up to the highest seq deleted (see 0011_changes_feed.sql).
        `WITH gone AS (
           DELETE FROM audit_log WHERE seq = ANY(ARRAY(
             SELECT seq FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2))
           RETURNING seq),
         moved AS (
           UPDATE event_horizon SET position = greatest(position, (SELECT max(seq) FROM gone))
           WHERE EXISTS (SELECT 1 FROM gone))
         SELECT count(*) AS deleted FROM gone`,
        [before, batch],
        { planEachTime: true },
      );
      return Number(rows[0]?.deleted ?? 0);
    },
  };
}
