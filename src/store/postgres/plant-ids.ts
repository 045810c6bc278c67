import { INT64_MIN } from '../../core/int64.js';
import type { Query } from './query.js';

/**
 * The pruning of plant_ids_taken on PostgreSQL (see the migration 0007_plant_id_pruning):
 * each call deletes one batch of the ids at or below the sequence's value, going up from where
 * the previous batch ended, so that a batch never walks the index entries of the ones before
 * it. A batch that finds fewer than `batch` ends the pass; the next call starts a new one
 * from the lowest id (clients may have taken ids below where this pass ended).
 */
export function postgresTakenIdsPruner(query: Query): (batch: number) => Promise<number> {
  let above = INT64_MIN;
  return async (batch: number) => {
    const { rows } = await query<{ deleted: number; last: bigint | null }>(
      'plantIds.prune',
      'SELECT deleted, last FROM plant_ids_prune($1::bigint, $2::integer)',
      [above.toString(), batch],
    );
    const { deleted, last } = rows[0]!;
    above = deleted < batch || last === null ? INT64_MIN : last;
    return deleted;
  };
}
