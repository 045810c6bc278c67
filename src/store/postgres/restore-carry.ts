// What a PostgreSQL restore carries over from the store it replaces (see restorePostgres in
// backup.ts): how far its counters went, read before the restore, and the SQL that moves the
// restored store's counters past them and keeps the ids clients chose.

import type pg from 'pg';

/**
 * How far the replaced store's counters went, each 0 when it has none: the changes feed's
 * positions (the audit log's sequence, its highest entry, the horizon: the highest that reads),
 * plant ids and plant versions. `feed` is why it cannot be read, if none of its records reads.
 */
export async function countersReached(client: pg.Client) {
  const read = async (sql: string) => {
    try {
      const { rows } = await client.query<{ n: string | null }>(sql);
      return BigInt(rows[0]?.n ?? 0);
    } catch (error) {
      return (error as Error).message;
    }
  };
  // One at a time: one connection runs one query at a time.
  const feed: (bigint | string)[] = [];
  for (const sql of [
    "SELECT pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'seq')::regclass) AS n",
    'SELECT max(seq) AS n FROM audit_log',
    'SELECT position AS n FROM event_horizon',
  ]) {
    feed.push(await read(sql));
  }
  const positions = feed.filter((n): n is bigint => typeof n === 'bigint');
  const highest = (values: bigint[]) => values.reduce((a, b) => (b > a ? b : a), 0n);
  const counter = async (sequence: string) => {
    const n = await read(`SELECT ${lastGiven(sequence)} AS n`);
    return typeof n === 'bigint' ? n : 0n;
  };
  return {
    feed: positions.length > 0 ? highest(positions) : (feed[0] as string),
    ids: await counter('plant_id_seq'),
    versions: await counter('plant_versions'),
  };
}

export type Reached = Awaited<ReturnType<typeof countersReached>>;

export const NOTHING_REACHED: Reached = { feed: 0n, ids: 0n, versions: 0n };

/**
 * The last value the sequence handed out (0 for none), read from the sequence itself:
 * pg_sequence_last_value is NULL until the first draw, also after a setval that left the
 * next draw at a value above 1 (as migration 0004 does).
 */
const lastGiven = (sequence: string) =>
  `(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ${sequence})`;

/**
 * Moves the restored store's counters past the replaced store's (see restorePostgres): the
 * feed's sequence and horizon to `feed`, the plant id and version sequences to where the
 * replaced ones were, where they are lower.
 */
export function carry(feed: bigint, { ids, versions }: Reached): string {
  const atLeast = (sequence: string, n: bigint) =>
    n > 0n ? `SELECT setval('${sequence}', greatest(${n}, ${lastGiven(sequence)}));\n` : '';
  // The identity sequence of audit_log, by the name the backup gave it.
  const positions =
    feed > 0n
      ? `DO $carry$ DECLARE
           feed regclass := pg_get_serial_sequence('audit_log', 'seq')::regclass;
           given bigint;
         BEGIN
           EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', feed)
             INTO given;
           PERFORM setval(feed, greatest(${feed}, given, (SELECT coalesce(max(seq), 0) FROM audit_log)));
         END $carry$;
         UPDATE event_horizon SET position = greatest(position, ${feed});\n`
      : '';
  return positions + atLeast('plant_id_seq', ids) + atLeast('plant_versions', versions);
}

// The ids clients chose above the replaced store's counter, kept through the drop and taken
// again by the restored store (after its counter is carried): no server create gives a plant
// the id a client chose, or chose and deleted, after the backup. A store older than
// server-assigned ids (0004) has none.
export const keepTakenIds = `CREATE TEMP TABLE plantstore_kept_ids (id bigint PRIMARY KEY) ON COMMIT DROP;
DO $keep$ BEGIN
  IF to_regclass('plant_ids_taken') IS NOT NULL THEN
    INSERT INTO pg_temp.plantstore_kept_ids
      SELECT id FROM plant_ids_taken WHERE id > ${lastGiven('plant_id_seq')};
  END IF;
END $keep$;\n`;
export const takeKeptIds = `INSERT INTO plant_ids_taken (id)
  SELECT id FROM pg_temp.plantstore_kept_ids WHERE id > ${lastGiven('plant_id_seq')}
  ON CONFLICT DO NOTHING;\n`;
