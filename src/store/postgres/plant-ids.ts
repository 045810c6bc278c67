import { INT64_MIN } from '../../core/int64.js';
import type { Query } from './query.js';

/**
 * The pruning of plant_ids_taken on PostgreSQL (see the migration 0007_plant_id_pruning). A
 * pass starts with a fence, which answers the last id the sequence drew: no id at or below it
 * is drawn again, so their records can go. Then each call deletes one batch of them, going up
 * from where the previous batch ended, so that a batch never walks the index entries of the
 * ones before it, and without a lock, so that creates never wait for it. A batch that finds
 * fewer than `batch` ends the pass; the next call fences anew and starts from the lowest id
 * (clients may have taken ids below where this pass ended).
 */
export function postgresTakenIdsPruner(query: Query): (batch: number) => Promise<number> {
  let above = INT64_MIN;
  let upTo: bigint | undefined;
  return async (batch: number) => {
    if (upTo === undefined) {
      const { rows } = await query<{ up_to: bigint }>(
        'plantIds.fence',
        'SELECT plant_ids_fence() AS up_to',
        [],
      );
      upTo = rows[0]!.up_to;
    }
    const { rows } = await query<{ deleted: number; last: bigint | null }>(
      'plantIds.prune',
      `WITH gone AS (
         DELETE FROM plant_ids_taken WHERE id IN (
           SELECT id FROM plant_ids_taken WHERE id > $1::bigint AND id <= $2::bigint
           ORDER BY id LIMIT $3::integer)
         RETURNING id)
       SELECT count(*)::integer AS deleted, max(id) AS last FROM gone`,
      [above.toString(), upTo.toString(), batch],
    );
    const { deleted, last } = rows[0]!;
    if (deleted < batch || last === null) {
      above = INT64_MIN;
      upTo = undefined;
    } else {
      above = last;
    }
    return deleted;
  };
}
